// kvscope-cli logits --model DIR --ids 1,2,3 --mode nocache|cached|prefill_then_step:
// each position's argmax and the last position's top logits for people; every
// logit of the last position with --json.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include <torch/types.h>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/scoring.h"

namespace kvscope::cli {

namespace {

constexpr int64_t kTopShown = 5;

void printLogits(FeedMode mode, const at::Tensor& logits, const at::Tensor& argmax) {  // [L, vocab], [L]
  std::cout << "logits of " << logits.size(0) << " positions (" << feedModeName(mode) << "), vocabulary "
            << logits.size(1) << "\nargmax per position:";
  for (int64_t i = 0; i < argmax.numel(); ++i) std::cout << (i ? "," : " ") << argmax[i].item<int64_t>();
  const auto [values, ids] = logits[-1].topk(std::min(kTopShown, logits.size(1)));  // [k], [k]
  std::cout << "\nlast position's top " << ids.numel() << ":" << std::fixed << std::setprecision(4);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    std::cout << (i ? ", " : " ") << "id " << ids[i].item<int64_t>() << " " << values[i].item<float>();
  }
  std::cout << "\n";
}

int runLogits(Args& args) {
  const bool json = args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  const auto ids = args.idList("ids");
  const FeedMode mode = parseFeedMode(args.value("mode").value_or("nocache"));
  const WeightResidency weights = weightResidency(args);
  args.finish();
  if (!ids) throw Error("missing required option --ids");
  const auto model = loadCausalLM(dir, computeOptions(), weights);
  const auto logits = sequenceLogits(*model, *ids, mode);  // [L, vocab]
  const auto argmax = logits.argmax(1).contiguous();
  if (!json) {
    printLogits(mode, logits, argmax);
    return 0;
  }
  const auto last = logits[-1].contiguous();
  printJson({{"mode", feedModeName(mode)},
             {"argmax", std::vector<int64_t>(argmax.data_ptr<int64_t>(), argmax.data_ptr<int64_t>() + argmax.numel())},
             {"last_logits", std::vector<float>(last.data_ptr<float>(), last.data_ptr<float>() + last.numel())}});
  return 0;
}

const CommandRegistrar kRegister{"logits", "logits [--model DIR] --ids 1,2,3 --mode nocache|cached|prefill_then_step [--weights stored|fp32] [--json]", runLogits};

}  // namespace
}  // namespace kvscope::cli
