#include "core/decode/drafter.h"

#include <algorithm>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

bool DraftRequest::stopsAt(int64_t token) const {
  return !ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
}

void Drafter::prefill(TrackedCache&, const Moment&, const std::function<void(ProbeSink*)>& feed_prefix) const {
  feed_prefix(nullptr);
}

namespace {

// The drafter's logits rows gathered into one [gamma, vocab] tensor as they
// come: float32 rows are copied into storage allocated once, others stacked
// at the end (torch::stack of the rows cost a small drafter 7% of its step).
class DraftLogits {
 public:
  explicit DraftLogits(int64_t gamma) : gamma_(gamma) {}
  void add(const at::Tensor& row) {  // [vocab]
    if (count_ == 0 || storage_.defined()) {
      const bool plain = row.dim() == 1 && row.scalar_type() == torch::kFloat32 && row.is_contiguous();
      if (plain && (count_ == 0 || row.size(0) == storage_.size(1))) {
        if (count_ == 0) storage_ = torch::empty({gamma_, row.size(0)}, torch::kFloat32);
        std::copy_n(row.data_ptr<float>(), row.size(0), storage_.data_ptr<float>() + count_ * storage_.size(1));
        ++count_;
        return;
      }
      for (int64_t i = 0; i < count_; ++i) stacked_.push_back(storage_[i]);  // from here on, stacked
      storage_ = at::Tensor();
    }
    stacked_.push_back(row);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  at::Tensor rows() const {  // [drafts, vocab]
    return stacked_.empty() ? storage_.narrow(0, 0, count_) : torch::stack(stacked_);
  }

 private:
  int64_t gamma_;
  int64_t count_ = 0;
  at::Tensor storage_;               // [gamma, vocab] while every row is plain
  std::vector<at::Tensor> stacked_;  // the rows, once one is not
};

}  // namespace

ModelDrafter::ModelDrafter(std::shared_ptr<const CausalLM> model, std::string name)
    : model_(std::move(model)), name_(std::move(name)) {
  require(model_ != nullptr, "ModelDrafter: no model");
}

std::string ModelDrafter::describe() const { return "model drafter " + name_; }

Draft ModelDrafter::draft(const DraftRequest& request) const {
  Draft draft;
  std::vector<int64_t> stream = request.sequence;
  std::vector<at::Tensor> q_rows;
  DraftLogits logit_rows(request.gamma);
  // With a confidence stop, a greedy pick's probability is needed before the
  // next draft; without one it is read once all drafts are in, off the loop.
  const bool confidence_in_loop = request.sampling.greedy && request.stop_below > 0;
  for (int64_t i = 0; i < request.gamma; ++i) {
    const at::Tensor logits = request.feed(stream);  // [vocab]
    logit_rows.add(logits);
    int64_t d = 0;
    if (request.sampling.greedy) {
      // Greedy acceptance compares tokens only: no processed distribution to keep.
      d = argmaxOf(logits);
      if (confidence_in_loop) draft.q_of_picks.push_back(softmaxOfPicks(logits.unsqueeze(0), {d})[0]);
    } else {
      const auto q = processedProbs(logits, request.sampling);  // [vocab]
      d = sampleFrom(q, request.generator);
      q_rows.push_back(q);
      draft.q_of_picks.push_back(q[d].item<double>());
    }
    draft.tokens.push_back(d);
    stream.push_back(d);
    // Like HF, stop drafting once the drafter proposes an end of sequence.
    if (request.stopsAt(d)) break;
    if (request.stop_below > 0 && draft.q_of_picks.back() < request.stop_below) break;
  }
  if (logit_rows.empty()) return draft;
  draft.logits = logit_rows.rows();  // [drafts, vocab]
  if (request.sampling.greedy && !confidence_in_loop) draft.q_of_picks = softmaxOfPicks(draft.logits, draft.tokens);
  if (!q_rows.empty()) draft.q = torch::stack(q_rows);  // [drafts, vocab]
  return draft;
}

NgramDrafter::NgramDrafter(int64_t max_ngram) : max_ngram_(max_ngram) {
  require(max_ngram >= 1, "n-gram drafter: n must be >= 1, got " + std::to_string(max_ngram));
}

std::string NgramDrafter::describe() const { return "prompt-lookup drafter (n <= " + std::to_string(max_ngram_) + ")"; }

Draft NgramDrafter::draft(const DraftRequest& request) const {
  Draft draft;
  draft.tokens = propose(request.sequence, request.gamma);
  if (draft.tokens.empty()) return draft;
  // A deterministic proposal: q is one-hot at each draft.
  std::vector<at::Tensor> q_rows;
  for (int64_t d : draft.tokens) {
    q_rows.push_back(at::one_hot(torch::tensor(d), request.vocab).to(torch::kFloat32));
    draft.q_of_picks.push_back(1.0);
  }
  draft.q = torch::stack(q_rows);  // [drafts, vocab]
  return draft;
}

std::vector<int64_t> NgramDrafter::propose(const std::vector<int64_t>& sequence, int64_t gamma) const {
  const int64_t length = static_cast<int64_t>(sequence.size());
  for (int64_t n = std::min(max_ngram_, length - 1); n >= 1; --n) {
    const auto suffix_begin = sequence.end() - n;
    // Latest earlier occurrence of the last n tokens that has a continuation.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix_begin, sequence.end(), sequence.begin() + start)) continue;
      // What followed it, continued periodically where it runs into the end
      // (an occurrence overlapping the suffix means the text repeats with
      // period length - follow): "a b a b" proposes "a b a b ...", not just "a b".
      const int64_t follow = start + n;
      std::vector<int64_t> proposal;
      for (int64_t i = 0; i < gamma; ++i) {
        const int64_t at = follow + i;
        proposal.push_back(at < length ? sequence[at] : proposal[at - length]);
      }
      return proposal;
    }
  }
  return {};
}

}  // namespace kvscope
