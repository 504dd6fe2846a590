// kvscope-cli tokenize / detokenize.
#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include <filesystem>

#include "core/error.h"
#include "core/model/model_config.h"

namespace kvscope::cli {

namespace {

int runTokenize(Args& args) {
  args.flag("json");  // the result is JSON either way
  const std::string dir = modelDirectory(args, "model", "target");
  auto text = args.value("text");
  auto file = args.value("text-file");
  args.finish();
  if (text.has_value() == file.has_value()) throw Error("give exactly one of --text or --text-file");
  const auto tokenizer = Tokenizer::fromDirectory(dir);
  const std::string input = text ? *text : readFileBytes(*file);
  printJson({{"ids", tokenizer->encode(input)}});
  return 0;
}

int runDetokenize(Args& args) {
  args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  const auto ids = args.idList("ids");
  args.finish();
  if (!ids) throw Error("missing required option --ids");
  const auto tokenizer = Tokenizer::fromDirectory(dir);
  // The model's vocabulary may be padded past the tokenizer; beyond the
  // model's vocabulary an id is simply wrong.
  const std::string config = (std::filesystem::path(dir) / "config.json").string();
  const int64_t vocab = std::filesystem::exists(config) ? loadModelConfig(config).vocab_size : tokenizer->vocabSize();
  for (int64_t id : *ids) {
    if (id < 0 || id >= vocab) {
      throw Error("--ids: token id " + std::to_string(id) + " is outside the model's vocabulary (size " +
                  std::to_string(vocab) + ")");
    }
  }
  // Ids the tokenizer has no text for (a model's padded vocabulary rows) are
  // shown as "<id N>" in the text and listed here.
  std::vector<int64_t> without_text;
  for (int64_t id : *ids) {
    if (id >= 0 && !tokenizer->hasText(id)) without_text.push_back(id);
  }
  printJson({{"text", tokenizer->decode(*ids)}, {"ids_without_text", without_text}});
  return 0;
}

const CommandRegistrar kRegisterTokenize{"tokenize", "tokenize [--model DIR] (--text T | --text-file F) [--json]", runTokenize};
const CommandRegistrar kRegisterDetokenize{"detokenize", "detokenize [--model DIR] --ids 1,2,3 [--json]", runDetokenize};

}  // namespace
}  // namespace kvscope::cli
