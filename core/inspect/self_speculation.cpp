#include "core/inspect/self_speculation.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <torch/types.h>

#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {

namespace {

void checkArguments(const std::vector<int64_t>& prompt, const SelfSpeculationOptions& options) {
  require(prompt.size() >= 2, "self-speculation: the prompt needs at least 2 tokens, got " + std::to_string(prompt.size()));
  require(options.gamma >= 1 && options.gamma <= 64, "--gamma must be in [1, 64], got " + std::to_string(options.gamma));
  require(options.max_new >= 1, "--max-new must be >= 1, got " + std::to_string(options.max_new));
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The draft cache proposes `count` tokens greedily after sequence (which it
// holds but for the last token).
std::vector<int64_t> draftTokens(const CausalLM& model, DraftCache& draft, const std::vector<int64_t>& sequence,
                                 int64_t count) {
  std::vector<int64_t> drafts;
  int64_t last = sequence.back();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t position = draft.positionOf(static_cast<int64_t>(sequence.size()) - 1 + i);
    last = model.forward(idsTensor({last}), position, &draft.cache(), nullptr, 1)[0].argmax().item<int64_t>();
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

// Cuts the sequence after the first EOS among its tokens from `from` on; true when there was one.
bool stopAtEos(std::vector<int64_t>& sequence, size_t from, const std::vector<int64_t>& eos_ids) {
  for (size_t i = from; i < sequence.size(); ++i) {
    if (std::find(eos_ids.begin(), eos_ids.end(), sequence[i]) != eos_ids.end()) {
      sequence.resize(i + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, const SelfSpeculationOptions& options,
                                         const CausalLM* drafter) {
  checkArguments(prompt, options);
  checkFitsContext(target, static_cast<int64_t>(prompt.size()), options.max_new + options.gamma);
  checkCacheStaysValid(target, static_cast<int64_t>(prompt.size()), options.max_new + options.gamma);
  const CausalLM& model = drafter != nullptr ? *drafter : target;  // the drafting model
  require(model.config().vocab_size == target.config().vocab_size,
          "self-speculation: the drafter's vocabulary differs from the target's");
  c10::InferenceMode guard;
  std::vector<int64_t> sequence = prompt;
  const auto prefill = idsTensor({prompt.begin(), prompt.end() - 1});  // [prompt - 1]
  auto full = target.makeCache();
  // Self-speculation: the target's one prefill fills both caches.
  const bool self = drafter == nullptr;
  DraftCache draft(model, prefill, spec, options.layout, self ? full.get() : nullptr);
  if (!self) target.forward(prefill, 0, full.get(), nullptr, 0);

  SelfSpeculationResult result;
  result.draft_rows = draft.cache().length(0);
  result.full_rows = full->length(0);
  const int64_t goal = static_cast<int64_t>(prompt.size()) + options.max_new;
  while (static_cast<int64_t>(sequence.size()) < goal && !result.stopped_at_eos) {
    const int64_t L = static_cast<int64_t>(sequence.size());
    const auto draft_start = Clock::now();
    draft.catchUp(model, sequence, L - 1);
    const std::vector<int64_t> drafts = draftTokens(model, draft, sequence, std::min(options.gamma, goal - L));
    result.draft_seconds += secondsSince(draft_start);
    const auto verify_start = Clock::now();
    const int64_t accepted = verifyAndAccept(target, *full, sequence, drafts);
    result.verify_seconds += secondsSince(verify_start);
    if (options.record) result.rounds_log.push_back({L, drafts, accepted, sequence.back()});
    // Both caches must hold every token but the new last one: L + accepted tokens.
    full->crop(L + accepted);
    draft.cropTo(L + accepted);
    ++result.rounds;
    result.drafted += static_cast<int64_t>(drafts.size());
    result.accepted += accepted;
    result.stopped_at_eos = stopAtEos(sequence, static_cast<size_t>(L), options.eos_ids);
  }
  const int64_t end = std::min<int64_t>(goal, static_cast<int64_t>(sequence.size()));
  result.tokens.assign(sequence.begin() + static_cast<int64_t>(prompt.size()), sequence.begin() + end);
  result.alpha = result.drafted > 0 ? static_cast<double>(result.accepted) / static_cast<double>(result.drafted) : 0;
  if (options.record) {
    // Both caches as of the last token: every token but the last (an EOS cut
    // may have dropped some the full cache verified; a fully accepted round
    // left the drafting copy one short), so row p of one is row p of the other.
    const int64_t held = static_cast<int64_t>(sequence.size()) - 1;
    full->crop(std::min(held, full->length(0)));
    draft.cropTo(held);
    draft.catchUp(model, sequence, held);
    result.caches = compareDraftCache(*full, draft.cache(), draft.shift(), static_cast<int64_t>(prompt.size()) - 1);
  }
  return result;
}

SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, int64_t gamma, int64_t max_new,
                                         const CausalLM* drafter) {
  SelfSpeculationOptions options;
  options.gamma = gamma;
  options.max_new = max_new;
  return runSelfSpeculation(target, prompt, spec, options, drafter);
}

}  // namespace kvscope
