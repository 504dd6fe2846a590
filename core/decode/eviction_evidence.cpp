#include "core/decode/eviction_evidence.h"

#include <algorithm>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

void EvictionEvidence::listen(bool attention, ProbeSink* inner, int64_t end_position) {
  attention_ = attention;
  inner_ = inner;
  if (attention_) chunks_.push_back({end_position, {}});
}

bool EvictionEvidence::wants(Probe probe, int64_t layer) const {
  return (attention_ && probe == Probe::AttentionWeights) || (inner_ && inner_->wants(probe, layer));
}

void EvictionEvidence::record(Probe probe, int64_t layer, const at::Tensor& value) {
  if (attention_ && probe == Probe::AttentionWeights && !chunks_.empty() && layer >= 0) {
    auto& weights = chunks_.back().weights;
    if (static_cast<int64_t>(weights.size()) <= layer) weights.resize(static_cast<size_t>(layer + 1));
    weights[static_cast<size_t>(layer)] = value.to(torch::kFloat32).clone();  // [heads, n, keys]; the forward reuses its buffers
  }
  if (inner_ && inner_->wants(probe, layer)) inner_->record(probe, layer, value);
}

int64_t EvictionEvidence::queriesOf(const Chunk& chunk) {
  return chunk.weights.empty() || !chunk.weights.front().defined() ? 0 : chunk.weights.front().size(1);
}

int64_t EvictionEvidence::firstPosition(const Chunk& chunk) const { return chunk.end_position - queriesOf(chunk); }

void EvictionEvidence::keepQueriesBefore(int64_t end) {
  std::vector<Chunk> kept;
  for (Chunk& chunk : chunks_) {
    const int64_t first = firstPosition(chunk);
    const int64_t keep = std::clamp<int64_t>(end - first, 0, queriesOf(chunk));
    if (keep == 0) continue;
    for (at::Tensor& w : chunk.weights) {
      if (w.defined()) w = w.narrow(1, 0, keep);  // [heads, keep, keys]
    }
    chunk.end_position = first + keep;
    kept.push_back(std::move(chunk));
  }
  chunks_ = std::move(kept);
}

int64_t EvictionEvidence::queries() const {
  int64_t n = 0;
  for (const Chunk& chunk : chunks_) n += queriesOf(chunk);
  return n;
}

std::vector<at::Tensor> EvictionEvidence::attention(const std::vector<int64_t>& rows) const {
  std::vector<std::vector<at::Tensor>> per_layer(rows.size());  // [layer][chunk] -> [heads, n, rows[l]]
  for (const Chunk& chunk : chunks_) {
    for (size_t l = 0; l < chunk.weights.size() && l < rows.size(); ++l) {
      const at::Tensor& w = chunk.weights[l];  // [heads, n, keys]
      if (!w.defined()) continue;
      // Keys past rows[l] were drafts a prune removed; rows past a chunk's
      // keys were written after its queries, which gave them no weight.
      const int64_t shared = std::min<int64_t>(w.size(2), rows[l]);
      auto padded = torch::zeros({w.size(0), w.size(1), rows[l]}, torch::kFloat32);  // [heads, n, rows[l]]
      padded.narrow(2, 0, shared).copy_(w.narrow(2, 0, shared));
      per_layer[l].push_back(padded);
    }
  }
  std::vector<at::Tensor> out;
  for (const auto& chunks : per_layer) out.push_back(chunks.empty() ? at::Tensor() : torch::cat(chunks, 1));
  if (std::none_of(out.begin(), out.end(), [](const at::Tensor& t) { return t.defined(); })) out.clear();
  return out;
}

}  // namespace kvscope
