#include "core/model/batch_rows.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"

namespace kvscope {

BatchRows::BatchRows(std::vector<SequenceForward> sequences) : sequences_(std::move(sequences)) {
  require(!sequences_.empty(), "forward: a batch needs at least one sequence");
  offsets_.push_back(0);
  for (const SequenceForward& s : sequences_) offsets_.push_back(offsets_.back() + s.tokens.size(0));
}

at::Tensor BatchRows::tokens() const {
  std::vector<at::Tensor> parts;
  for (const SequenceForward& s : sequences_) parts.push_back(s.tokens);
  return join(parts, 0);  // [N]
}

at::Tensor BatchRows::positionsOf(size_t i) const {
  const SequenceForward& s = sequences_[i];
  const at::Tensor real = torch::arange(s.start_pos, s.start_pos + s.realCount(), torch::kInt64);  // [real]
  if (s.pads.before == 0 && s.pads.after == 0) return real;
  return torch::cat({torch::zeros({s.pads.before}, torch::kInt64), real, torch::zeros({s.pads.after}, torch::kInt64)});  // [n_i]
}

int64_t BatchRows::positionOf(size_t i, int64_t r) const {
  const SequenceForward& s = sequences_[i];
  if (r < s.pads.before || r >= s.pads.before + s.realCount()) return 0;  // a pad
  return s.start_pos + r - s.pads.before;
}

at::Tensor BatchRows::rowsOf(const at::Tensor& x, size_t i, int64_t dim) const {
  if (size() == 1) return x;
  return x.narrow(dim, offset(i), count(i));
}

void BatchRows::probeEach(Probe point, int64_t layer, const at::Tensor& x, int64_t dim) const {
  for (size_t i = 0; i < size(); ++i) probe(sequences_[i].probes, point, layer, rowsOf(x, i, dim));
}

int64_t BatchRows::logitCount(size_t i) const {
  const int64_t n = sequences_[i].realCount(), wanted = sequences_[i].logit_rows;
  return wanted < 0 ? n : std::min(wanted, n);
}

int64_t BatchRows::firstLogitRow(size_t i) const {
  return offset(i) + count(i) - sequences_[i].pads.after - logitCount(i);
}

at::Tensor BatchRows::logitRows(const at::Tensor& x) const {
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < size(); ++i) {
    const int64_t rows = logitCount(i);
    parts.push_back(rows == count(i) ? rowsOf(x, i) : x.narrow(0, firstLogitRow(i), rows));
  }
  return join(parts, 0);  // [sum of logit rows, hidden]
}

std::vector<at::Tensor> BatchRows::splitLogits(const at::Tensor& logits) const {
  std::vector<at::Tensor> out;
  int64_t first = 0;
  for (size_t i = 0; i < size(); ++i) {
    const int64_t rows = logitCount(i);
    out.push_back(size() == 1 ? logits : logits.narrow(0, first, rows));  // [rows_i, vocab]
    first += rows;
  }
  return out;
}

at::Tensor BatchRows::join(const std::vector<at::Tensor>& parts, int64_t dim) {
  if (parts.size() == 1) return parts.front();
  return torch::cat(parts, dim);
}

}  // namespace kvscope
