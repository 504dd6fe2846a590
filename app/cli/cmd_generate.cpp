// kvscope-cli generate: plain autoregressive decoding (the baseline).
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/model_bundle.h"

namespace kvscope::cli {

namespace {

// --prompts FILE decodes each line's prompt in turn (not as a batch): the
// file is bounded by its size, and one prompt's run does not wait for another.
constexpr int64_t kMaxGeneratePrompts = 100000;

nlohmann::json generationJson(const GenerateResult& result, const std::string& text, const std::vector<int64_t>& prompt) {
  return {{"ids", result.ids},
          {"text", text},
          {"prompt_ids", prompt},
          {"forward_calls", result.forward_calls},
          {"stopped_at_eos", result.stopped_at_eos}};
}

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
  std::vector<std::vector<int64_t>> prompts;
  const auto file = args.value("prompts");
  if (file) {
    if (args.value("prompt") || args.value("prompt-ids")) throw Error("give --prompts FILE or one prompt, not both");
    if (!bundle.has_tokenizer) throw Error("--prompts needs a tokenizer, but " + dir + " has no tokenizer.json");
    for (const std::string& line : promptFileLines(*file, kMaxGeneratePrompts, "split the file")) {
      prompts.push_back(bundle.tokenizer->encode(line));
      if (prompts.back().empty()) throw Error("--prompts " + *file + ": a line encodes to no token");
    }
  } else {
    prompts.push_back(promptIds(args, bundle));
  }
  args.finish();

  nlohmann::json results = nlohmann::json::array();
  for (const auto& prompt : prompts) {
    const auto result = generateAutoregressive(*bundle.model, prompt, options, bundle.eos_ids);
    const std::string text = bundle.tokenizer->decode(result.ids);
    if (!json) std::cout << bundle.tokenizer->decode(prompt) << text << "\n" << std::flush;
    if (json) results.push_back(generationJson(result, text, prompt));
  }
  if (json) printJson(file ? nlohmann::json{{"generations", results}} : results.front());
  return 0;
}

const CommandRegistrar kRegister{"generate", "generate [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3 | --prompts FILE) --max-new N [--cache on|off] [--weights stored|fp32]\n"
    "           [--ignore-eos] [--greedy | --temperature T --top-k K --top-p P] [--seed S] [--json]\n"
    "           --prompts: one prompt per line, each decoded in turn and printed as prompt + continuation\n"
    "           on its own line (--json: {\"generations\": [...]})\n"
    "           --weights: bfloat16 / float16 checkpoints stay so in memory, widened to float32 inside the matrix\n"
    "           products (stored, the default; same logits), or are widened at load (fp32)", runGenerate};

}  // namespace
}  // namespace kvscope::cli
