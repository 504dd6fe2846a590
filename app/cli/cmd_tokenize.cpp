// kvscope-cli tokenize / detokenize: the ids and each token's text for
// people, {"ids"} / {"text", "ids_without_text"} with --json.
#include <filesystem>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/model_config.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope::cli {

namespace {

std::string joined(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

// A token's text in double quotes, so its spaces show; quotes and
// backslashes escaped, and control characters too (visibleText): a token
// cannot break the line or drive the terminal.
std::string quotedPiece(const std::string& text) {
  std::string out = "\"";
  for (char c : visibleText(text)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The count, the ids as --prompt-ids takes them, and each token's text.
void printTokens(const std::vector<int64_t>& ids, const Tokenizer& tokenizer) {
  std::cout << ids.size() << (ids.size() == 1 ? " token" : " tokens") << "\nids:    " << joined(ids) << "\npieces:";
  for (int64_t id : ids) std::cout << " " << quotedPiece(tokenizer.tokenText(id));
  std::cout << "\n";
}

int runTokenize(Args& args) {
  const bool json = args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  auto text = args.value("text");
  auto file = args.value("text-file");
  args.finish();
  if (text.has_value() == file.has_value()) throw Error("give exactly one of --text or --text-file");
  const auto tokenizer = Tokenizer::fromDirectory(dir);
  const std::string input = text ? *text : readFileBytes(*file);
  const std::vector<int64_t> ids = tokenizer->encode(input);
  if (json) {
    printJson({{"ids", ids}});
  } else {
    printTokens(ids, *tokenizer);
  }
  return 0;
}

int runDetokenize(Args& args) {
  const bool json = args.flag("json");
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
  const std::string text = tokenizer->decode(*ids);
  if (json) {
    printJson({{"text", text}, {"ids_without_text", without_text}});
    return 0;
  }
  // The text as decoded (as generate prints it), then what it does not show.
  std::cout << text << "\n";
  if (!without_text.empty()) {
    std::cout << "ids with no text in the tokenizer (shown as <id N>): " << joined(without_text) << "\n";
  }
  return 0;
}

const CommandRegistrar kRegisterTokenize{"tokenize", "tokenize [--model DIR] (--text T | --text-file F) [--json]", runTokenize};
const CommandRegistrar kRegisterDetokenize{"detokenize", "detokenize [--model DIR] --ids 1,2,3 [--json]", runDetokenize};

}  // namespace
}  // namespace kvscope::cli
