#include "core/compress/self_speculation.h"

#include <algorithm>
#include <string>

#include <torch/types.h>

#include "core/compress/self_speculation_drafter.h"
#include "core/decode/autoregressive.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {

namespace {

void checkArguments(const std::vector<int64_t>& prompt, const SelfSpeculationOptions& options) {
  require(prompt.size() >= 2, "self-speculation: the prompt needs at least 2 tokens, got " + std::to_string(prompt.size()));
  require(options.gamma >= 1 && options.gamma <= 64, "--gamma must be in [1, 64], got " + std::to_string(options.gamma));
  require(options.max_new >= 1, "--max-new must be >= 1, got " + std::to_string(options.max_new));
}

// The session shares its models; the caller's outlive it (it lives in one call).
std::shared_ptr<const CausalLM> borrowed(const CausalLM& model) {
  return std::shared_ptr<const CausalLM>(std::shared_ptr<const CausalLM>(), &model);
}

// A greedy session that drafts up to every token still to come (a round may
// then end one past max_new, cut off below) and leaves the end of sequence to
// the caller, who stops after the round that emits one.
SessionOptions sessionOptions(const SelfSpeculationOptions& options) {
  SessionOptions session;
  session.gamma = options.gamma;
  session.max_new_tokens = options.max_new + 1;  // a session drafts at most the tokens to come less one
  session.ignore_eos = true;
  session.record_attention = false;
  session.record_logits = false;
  return session;
}

// The index after the first end-of-sequence token in tokens[from..), or 0 when there is none.
size_t endAfterEos(const std::vector<int64_t>& tokens, size_t from, const std::vector<int64_t>& eos_ids) {
  for (size_t i = from; i < tokens.size(); ++i) {
    if (std::find(eos_ids.begin(), eos_ids.end(), tokens[i]) != eos_ids.end()) return i + 1;
  }
  return 0;
}

// Both caches as of the last token, copied, so row p of one is row p of the
// other: every token but the last (an EOS cut may have dropped some the full
// cache verified; a fully accepted round left the drafting copy one short, so
// its copy catches up here, a forward on the copy only).
DraftCacheComparison compareCaches(const Session& session, const CausalLM& drafting, const std::vector<int64_t>& sequence,
                                   int64_t prompt_length) {
  const int64_t held = static_cast<int64_t>(sequence.size()) - 1;
  KvCache full = session.targetCache()->clone();
  full.crop(std::min(held, full.length(0)));
  KvCache draft = session.drafterCache()->clone();
  // How far the copy's positions sit before the sequence's (re-rotated rows).
  const int64_t fed = static_cast<int64_t>(session.believedCacheTokens(CacheRole::Drafter).size());
  const int64_t shift = fed - draft.endPosition(0);
  draft.cropToPosition(std::min(held, fed) - shift);
  if (fed < held) {
    drafting.forward(idsTensor({sequence.begin() + fed, sequence.begin() + held}), fed - shift, &draft, nullptr, 0);
  }
  return compareDraftCache(full, draft, shift, prompt_length - 1);
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
  const auto drafting = std::make_shared<CompressedCacheDrafter>(borrowed(model), spec, options.layout,
                                                                 drafter != nullptr ? "drafter" : "target");
  c10::InferenceMode guard;
  Session session(borrowed(target), drafting, prompt, sessionOptions(options), {});

  SelfSpeculationResult result;
  session.stepPhase();  // the prefill, and the drafting copy's compression
  result.draft_rows = session.drafterCache()->length(0);
  result.full_rows = session.targetCache()->length(0);
  const size_t prompt_length = prompt.size();
  const size_t goal = prompt_length + static_cast<size_t>(options.max_new);
  size_t end = 0;  // the sequence's end after an end of sequence
  while (session.sequence().size() < goal && end == 0) {
    session.stepRound();
    const RoundRecord& round = session.rounds().back();
    if (options.record) result.rounds_log.push_back({round.start_length, round.drafts, round.accepted, round.next_token});
    ++result.rounds;
    result.drafted += static_cast<int64_t>(round.drafts.size());
    result.accepted += round.accepted;
    result.draft_seconds += round.draft_ms / 1000;
    result.verify_seconds += round.verify_ms / 1000;
    end = endAfterEos(session.sequence(), static_cast<size_t>(round.start_length), options.eos_ids);
  }
  result.stopped_at_eos = end > 0;
  std::vector<int64_t> sequence = session.sequence();
  if (end > 0) sequence.resize(end);
  result.tokens.assign(sequence.begin() + static_cast<int64_t>(prompt_length),
                       sequence.begin() + static_cast<int64_t>(std::min(goal, sequence.size())));
  result.alpha = result.drafted > 0 ? static_cast<double>(result.accepted) / static_cast<double>(result.drafted) : 0;
  if (options.record) result.caches = compareCaches(session, model, sequence, static_cast<int64_t>(prompt_length));
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
