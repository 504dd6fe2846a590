#include "core/inspect/self_speculation.h"

#include <algorithm>
#include <string>

#include <torch/torch.h>

#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {

namespace {

void checkArguments(const std::vector<int64_t>& prompt, int64_t gamma, int64_t max_new) {
  require(prompt.size() >= 2, "self-speculation: the prompt needs at least 2 tokens, got " + std::to_string(prompt.size()));
  require(gamma >= 1 && gamma <= 64, "--gamma must be in [1, 64], got " + std::to_string(gamma));
  require(max_new >= 1, "--max-new must be >= 1, got " + std::to_string(max_new));
}

// Feeds sequence[cache.length() .. end) so the cache holds `end` rows.
void catchUp(const CausalLM& model, KvCache& cache, const std::vector<int64_t>& sequence, int64_t end) {
  const int64_t start = cache.length();
  if (start >= end) return;
  model.forward(idsTensor({sequence.begin() + start, sequence.begin() + end}), start, &cache, nullptr, 0);
}

// The draft cache proposes `count` tokens greedily after sequence (which it
// holds but for the last token).
std::vector<int64_t> draftTokens(const CausalLM& model, KvCache& draft, const std::vector<int64_t>& sequence,
                                 int64_t count) {
  std::vector<int64_t> drafts;
  int64_t last = sequence.back();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t position = static_cast<int64_t>(sequence.size()) - 1 + i;
    last = model.forward(idsTensor({last}), position, &draft, nullptr, 1)[0].argmax().item<int64_t>();
    drafts.push_back(last);
  }
  return drafts;
}

// Verifies [last, d1..d_g] over the full cache in one forward (row i
// predicts the token after d_i), appends the accepted drafts and the
// target's next token to sequence, and returns how many drafts it accepted.
int64_t verifyAndAccept(const CausalLM& target, KvCache& full, std::vector<int64_t>& sequence,
                        const std::vector<int64_t>& drafts) {
  const int64_t L = static_cast<int64_t>(sequence.size());
  std::vector<int64_t> verify{sequence.back()};
  verify.insert(verify.end(), drafts.begin(), drafts.end());
  const auto best = target.forward(idsTensor(verify), L - 1, &full).argmax(1).contiguous();  // [g + 1]
  const int64_t* verified = best.data_ptr<int64_t>();  // verified[i]: the target's token after verify[i]
  int64_t accepted = 0;
  while (accepted < static_cast<int64_t>(drafts.size()) && drafts[accepted] == verified[accepted]) ++accepted;
  sequence.insert(sequence.end(), drafts.begin(), drafts.begin() + accepted);
  sequence.push_back(verified[accepted]);  // the correction, or the bonus when every draft was accepted
  return accepted;
}

}  // namespace

SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, int64_t gamma, int64_t max_new,
                                         const CausalLM* drafter) {
  checkArguments(prompt, gamma, max_new);
  checkFitsContext(target, static_cast<int64_t>(prompt.size()), max_new + gamma);
  const CausalLM& model = drafter != nullptr ? *drafter : target;  // the drafting model
  require(model.config().vocab_size == target.config().vocab_size,
          "self-speculation: the drafter's vocabulary differs from the target's");
  c10::InferenceMode guard;
  std::vector<int64_t> sequence = prompt;
  const auto prefill = idsTensor({prompt.begin(), prompt.end() - 1});  // [prompt - 1]
  auto full = target.makeCache();
  auto draft = model.makeCache();
  target.forward(prefill, 0, full.get(), nullptr, 0);
  prefillAndCompress(model, prefill, *draft, spec);

  SelfSpeculationResult result;
  const int64_t goal = static_cast<int64_t>(prompt.size()) + max_new;
  while (static_cast<int64_t>(sequence.size()) < goal) {
    const int64_t L = static_cast<int64_t>(sequence.size());
    catchUp(model, *draft, sequence, L - 1);
    const std::vector<int64_t> drafts = draftTokens(model, *draft, sequence, std::min(gamma, goal - L));
    const int64_t accepted = verifyAndAccept(target, *full, sequence, drafts);
    // Both caches must hold every token but the new last one: L + accepted rows.
    full->crop(L + accepted);
    draft->crop(std::min(draft->length(), L + accepted));
    ++result.rounds;
    result.drafted += static_cast<int64_t>(drafts.size());
    result.accepted += accepted;
  }
  result.tokens.assign(sequence.begin() + static_cast<int64_t>(prompt.size()), sequence.begin() + goal);
  result.alpha = result.drafted > 0 ? static_cast<double>(result.accepted) / static_cast<double>(result.drafted) : 0;
  return result;
}

}  // namespace kvscope
