#include "core/train/greedy_acceptance.h"

#include "core/decode/autoregressive.h"
#include "core/decode/session.h"
#include "core/error.h"

namespace kvscope {
namespace {

void checkRequest(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t extra, const char* role) {
  require(!prompt.empty(), "acceptance: empty prompt");
  require(static_cast<int64_t>(prompt.size()) + extra <= model.config().contextLength(),
          std::string("acceptance: prompt plus new tokens exceed the ") + role + "'s context length");
}

// The session shares its models; these outlive it (it lives in one call).
std::shared_ptr<const CausalLM> borrowed(const CausalLM& model) {
  return std::shared_ptr<const CausalLM>(std::shared_ptr<const CausalLM>(), &model);
}

}  // namespace

std::vector<int64_t> greedyContinuation(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t max_new) {
  checkRequest(model, prompt, max_new, "model");
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  return generateAutoregressive(model, prompt, options, {}).ids;
}

AcceptanceStats greedyAcceptance(const CausalLM& target, const CausalLM& drafter, const std::vector<int64_t>& prompt,
                                 int64_t gamma, int64_t max_new) {
  require(gamma > 0 && max_new > 0, "acceptance: gamma and max_new must be positive");
  require(target.config().vocab_size == drafter.config().vocab_size,
          "acceptance: the target and the drafter have different vocabulary sizes");
  checkRequest(target, prompt, max_new + gamma + 1, "target");
  checkRequest(drafter, prompt, max_new + gamma + 1, "drafter");
  SessionOptions options;
  options.gamma = gamma;
  // A session drafts at most the tokens still to come less one; gamma more
  // than max_new keeps every round at gamma drafts until max_new are out.
  options.max_new_tokens = max_new + gamma;
  options.ignore_eos = true;
  options.record_attention = false;
  options.record_logits = false;
  Session session(borrowed(target), std::make_shared<ModelDrafter>(borrowed(drafter), "drafter"), prompt, options, {});
  while (static_cast<int64_t>(session.generated().size()) < max_new) session.stepRound();
  AcceptanceStats stats;
  for (const RoundRecord& round : session.rounds()) {
    if (round.index == 0) continue;  // the prefill
    ++stats.rounds;
    stats.drafted += static_cast<int64_t>(round.drafts.size());
    stats.accepted += round.accepted;
  }
  return stats;
}

}  // namespace kvscope
