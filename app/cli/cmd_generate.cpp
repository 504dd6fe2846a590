// kvscope-cli generate: plain autoregressive decoding (the baseline).
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/model_bundle.h"

namespace kvscope::cli {

namespace {

int runGenerate(Args& args) {
  const bool json = args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  GenerateOptions options;
  options.max_new_tokens = args.integer("max-new", 32);
  options.ignore_eos = args.flag("ignore-eos");
  options.seed = static_cast<uint64_t>(args.integer("seed", 0));
  const std::string cache = args.value("cache").value_or("on");
  if (cache != "on" && cache != "off") throw Error("--cache must be on or off, got '" + cache + "'");
  options.use_cache = cache == "on";
  options.sampling = samplingSettings(args);
  const ModelBundle bundle = loadModelBundle(dir, computeOptions(), weightResidency(args));
  const auto prompt = promptIds(args, bundle);
  args.finish();

  const auto result = generateAutoregressive(*bundle.model, prompt, options, bundle.eos_ids);
  const std::string text = bundle.tokenizer->decode(result.ids);
  if (!json) std::cout << bundle.tokenizer->decode(prompt) << text << "\n";
  if (json) printJson({{"ids", result.ids},
                       {"text", text},
                       {"prompt_ids", prompt},
                       {"forward_calls", result.forward_calls},
                       {"stopped_at_eos", result.stopped_at_eos}});
  return 0;
}

const CommandRegistrar kRegister{"generate", "generate [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) --max-new N [--cache on|off] [--weights stored|fp32]\n"
    "           [--ignore-eos] [--greedy | --temperature T --top-k K --top-p P] [--seed S] [--json]\n"
    "           --weights: bfloat16 / float16 checkpoints stay so in memory, widened to float32 inside the matrix\n"
    "           products (stored, the default; same logits), or are widened at load (fp32)", runGenerate};

}  // namespace
}  // namespace kvscope::cli
