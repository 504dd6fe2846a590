// Tokenizer::fromFile / fromDirectory: reading the files and turning JSON
// access errors into Errors that name the file.
#include "core/model/tokenizer/tokenizer.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/hf_tokenizer.h"
#include "core/model/tokenizer/tokenizer_json.h"

namespace kvscope {
namespace {

std::unique_ptr<Tokenizer> load(const std::string& tokenizer_path,
                                const nlohmann::json& config) {
  const nlohmann::json tokenizer = readJsonFile(tokenizer_path, kTokenizerJsonLimits);
  try {
    return HfTokenizer::fromJson(tokenizer, config, tokenizer_path);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type or a missing required key: nlohmann's text
    // without its "[json.exception.type_error.302] " tag.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (!what.empty() && what[0] == '[' && tag_end != std::string::npos) what = what.substr(tag_end + 2);
    fail(tokenizer_path, "unexpected tokenizer.json structure: " + what);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::fromFile(const std::string& tokenizer_json_path) {
  return load(tokenizer_json_path, nullptr);
}

std::unique_ptr<Tokenizer> Tokenizer::fromDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path tokenizer_path = fs::path(dir) / "tokenizer.json";
  if (!fs::exists(tokenizer_path)) {
    const bool has_sentencepiece = fs::exists(fs::path(dir) / "tokenizer.model");
    fail(tokenizer_path.string(),
         has_sentencepiece ? "file not found (only tokenizer.model is present; "
                             "convert it to tokenizer.json with transformers)"
                           : "file not found");
  }
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  const nlohmann::json config =
      fs::exists(config_path) ? readJsonFile(config_path.string(), kTokenizerConfigLimits) : nlohmann::json();
  return load(tokenizer_path.string(), config);
}

}  // namespace kvscope
