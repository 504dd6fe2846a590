// kvscope-cli make-model: a random-weight model of a real shape (e.g.
// Qwen2.5-0.5B's) as a Hugging Face directory, for benchmarks at real size.
// No tokenizer: such a model runs on --prompt-ids.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/model_config.h"
#include "core/train/model_shapes.h"

namespace kvscope::cli {
namespace {

std::string humanBytes(double bytes) {
  std::ostringstream out;
  if (bytes >= 1e12) out << std::fixed << std::setprecision(1) << bytes / 1e12 << " TB";
  else out << std::fixed << std::setprecision(bytes < 1e10 ? 2 : 0) << bytes / 1e9 << " GB";
  return out.str();
}

// The machine's physical memory: a model that cannot fit in it is refused
// before the first tensor is allocated (a 2^20-wide config asked for 64 TB
// and died in the allocator with "internal error").
double physicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

// Building holds every weight in float32, then a copy in the storage dtype
// while it is written, and one float32 temporary of the largest tensor.
void refuseIfTooLarge(const nlohmann::json& config_json, const std::string& shape, StDType storage) {
  const ModelConfig config = parseModelConfig(config_json, shape);
  double largest = 0;
  for (const TensorSpec& spec : expectedTensors(config)) {
    double elements = 1;
    for (int64_t extent : spec.shape) elements *= static_cast<double>(extent);
    largest = std::max(largest, elements);
  }
  const double parameters = parameterCountOf(config);
  const double bytes = parameters * static_cast<double>(4 + stDTypeSize(storage)) + largest * 4;
  const double limit = physicalMemoryBytes();
  if (limit > 0 && bytes > limit) {
    std::ostringstream params;
    params << std::setprecision(3) << parameters;
    throw Error("model shape '" + shape + "' has " + params.str() + " parameters: building it needs about " +
                humanBytes(bytes) + " of memory (float32 weights, 4 bytes each, plus the " +
                std::to_string(stDTypeSize(storage)) + "-byte copy written), more than this machine's " +
                humanBytes(limit) + " (the limit); nothing was allocated");
  }
}

int runMakeModel(Args& args) {
  const bool json = args.flag("json");
  const std::string shape = args.required("shape");
  const std::string out = args.required("out");
  const std::string dtype = args.value("dtype").value_or("bf16");
  const StDType storage = storageType(dtype);
  // -1 would wrap to 2^64 - 1 and print as that: refused, as compress does.
  const int64_t signed_seed = args.integer("seed", 1);
  if (signed_seed < 0) throw Error("--seed must be >= 0, got " + std::to_string(signed_seed));
  const auto seed = static_cast<uint64_t>(signed_seed);
  args.finish();

  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json config = modelShapeConfig(shape);
  refuseIfTooLarge(config, shape, storage);
  const int64_t parameters = writeRandomModel(config, storage, seed, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!json) {
    std::cout << "wrote " << out << ": " << shape << " shape, " << parameters << " parameters (random weights, seed "
              << seed << "), " << dtype << ", no tokenizer (use --prompt-ids), " << seconds << " s\n";
  }
  if (json) {
    printJson({{"out", out}, {"shape", shape}, {"parameters", parameters}, {"dtype", dtype}, {"seed", seed},
               {"seconds", seconds}});
  }
  return 0;
}

const CommandRegistrar kRegister{"make-model",
    "make-model --shape qwen2.5-0.5b|bundled-target|bundled-drafter|CONFIG.json|DIR --out DIR\n"
    "           [--dtype bf16|f16|f32] [--seed S] [--json]   # random weights, no tokenizer",
    runMakeModel};

}  // namespace
}  // namespace kvscope::cli
