// kvscope-cli make-model: a random-weight model of a real shape (e.g.
// Qwen2.5-0.5B's) as a Hugging Face directory, for benchmarks at real size.
// No tokenizer: such a model runs on --prompt-ids.
#include <chrono>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/train/model_shapes.h"

namespace kvscope::cli {
namespace {

int runMakeModel(Args& args) {
  const bool json = args.flag("json");
  const std::string shape = args.required("shape");
  const std::string out = args.required("out");
  const std::string dtype = args.value("dtype").value_or("bf16");
  const StDType storage = storageType(dtype);
  const auto seed = static_cast<uint64_t>(args.integer("seed", 1));
  args.finish();

  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json config = modelShapeConfig(shape);
  const int64_t parameters = writeRandomModel(config, storage, seed, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!json) {
    std::cout << "wrote " << out << ": " << shape << " shape, " << parameters << " parameters (random weights, seed "
              << seed << "), " << dtype << ", no tokenizer (use --prompt-ids), " << seconds << " s\n";
  }
  printJson({{"out", out}, {"shape", shape}, {"parameters", parameters}, {"dtype", dtype}, {"seed", seed},
             {"seconds", seconds}});
  return 0;
}

const CommandRegistrar kRegister{"make-model",
    "make-model --shape qwen2.5-0.5b|bundled-target|bundled-drafter|CONFIG.json|DIR --out DIR\n"
    "           [--dtype bf16|f16|f32] [--seed S] [--json]   # random weights, no tokenizer",
    runMakeModel};

}  // namespace
}  // namespace kvscope::cli
