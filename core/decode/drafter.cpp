#include "core/decode/drafter.h"

#include "core/error.h"

namespace kvscope {

ModelDrafter::ModelDrafter(std::shared_ptr<const CausalLM> model, std::string name)
    : model_(std::move(model)), name_(std::move(name)) {
  require(model_ != nullptr, "ModelDrafter: no model");
}

std::string ModelDrafter::describe() const { return "model drafter " + name_; }

NgramDrafter::NgramDrafter(int64_t max_ngram) : max_ngram_(max_ngram) {
  require(max_ngram >= 1, "n-gram drafter: n must be >= 1, got " + std::to_string(max_ngram));
}

std::string NgramDrafter::describe() const { return "prompt-lookup drafter (n <= " + std::to_string(max_ngram_) + ")"; }

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
