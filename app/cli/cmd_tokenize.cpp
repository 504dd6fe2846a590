// kvscope-cli tokenize / detokenize.
#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"

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
  printJson({{"text", tokenizer->decode(*ids)}});
  return 0;
}

const CommandRegistrar kRegisterTokenize{"tokenize", "tokenize [--model DIR] (--text T | --text-file F)", runTokenize};
const CommandRegistrar kRegisterDetokenize{"detokenize", "detokenize [--model DIR] --ids 1,2,3", runDetokenize};

}  // namespace
}  // namespace kvscope::cli
