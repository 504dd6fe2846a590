// kvscope-cli logits --model DIR --ids 1,2,3 --mode nocache|cached|prefill_then_step
#include <torch/types.h>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/scoring.h"

namespace kvscope::cli {

namespace {

int runLogits(Args& args) {
  args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  const auto ids = args.idList("ids");
  const FeedMode mode = parseFeedMode(args.value("mode").value_or("nocache"));
  const WeightResidency weights = weightResidency(args);
  args.finish();
  if (!ids) throw Error("missing required option --ids");
  const auto model = loadCausalLM(dir, computeOptions(), weights);
  const auto logits = sequenceLogits(*model, *ids, mode);  // [L, vocab]
  const auto argmax = logits.argmax(1).contiguous();
  const auto last = logits[-1].contiguous();
  printJson({{"mode", feedModeName(mode)},
             {"argmax", std::vector<int64_t>(argmax.data_ptr<int64_t>(), argmax.data_ptr<int64_t>() + argmax.numel())},
             {"last_logits", std::vector<float>(last.data_ptr<float>(), last.data_ptr<float>() + last.numel())}});
  return 0;
}

const CommandRegistrar kRegister{"logits", "logits [--model DIR] --ids 1,2,3 --mode nocache|cached|prefill_then_step [--weights stored|fp32] [--json]", runLogits};

}  // namespace
}  // namespace kvscope::cli
