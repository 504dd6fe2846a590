#include "core/model/tokenizer/hf_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

// Added tokens may sit above the model's ids, but a corrupt id must not
// make the vocabulary size absurd.
constexpr int64_t kMaxAddedIdBeyondModel = int64_t{1} << 20;

// Used for eosId() only when no tokenizer_config.json names the EOS token.
const char* const kCommonEosTokens[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"};

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::fromJson(const nlohmann::json& tokenizer,
                                                   const nlohmann::json& config,
                                                   const std::string& context) {
  if (!tokenizer.is_object()) fail(context, "top level must be a JSON object");
  if (!tokenizer.contains("model")) fail(context, "no \"model\" section");
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  t->model_ = BpeModel::fromJson(tokenizer.at("model"), context);
  const nlohmann::json null;
  auto section = [&](const char* key) -> const nlohmann::json& {
    return tokenizer.contains(key) ? tokenizer.at(key) : null;
  };
  t->added_ = AddedVocabulary::fromJson(section("added_tokens"), context);
  t->normalizer_ = makeNormalizer(section("normalizer"), context);
  t->pre_tokenizer_ = makePreTokenizer(section("pre_tokenizer"), context);
  t->post_processor_ = makePostProcessor(section("post_processor"), context);
  t->decoder_ = makeTokenDecoder(section("decoder"), context);

  t->vocab_size_ = t->model_->idLimit();
  for (const AddedToken& token : t->added_.tokens()) {
    if (token.id > t->model_->idLimit() + kMaxAddedIdBeyondModel) {
      fail(context, "added token '" + token.content + "' has id " + std::to_string(token.id) +
                        ", far beyond the model's " + std::to_string(t->model_->idLimit()));
    }
    t->vocab_size_ = std::max(t->vocab_size_, token.id + 1);
  }
  t->checkPostProcessorIds(context);
  t->readSpecialIds(config);
  return t;
}

// The file's ids are not checked against each other by the format: without
// this, encode() could emit any id the post-processor names.
void HfTokenizer::checkPostProcessorIds(const std::string& context) const {
  if (!post_processor_) return;
  for (const int64_t id : post_processor_->addedIds()) {
    if (added_.byId(id) || model_->idToToken(id)) continue;
    fail(context, "post_processor adds token id " + std::to_string(id) +
                      ", which is not in the vocabulary (size " + std::to_string(vocab_size_) + ")");
  }
}

// BOS/EOS: tokenizer_config.json first (what transformers reports), then
// the post-processor's leading token for BOS and common names for EOS.
void HfTokenizer::readSpecialIds(const nlohmann::json& config) {
  auto configured = [&](const char* key) -> std::optional<int64_t> {
    if (!config.is_object() || !config.contains(key)) return std::nullopt;
    const std::string content = tokenContent(config.at(key));  // "" for null
    return content.empty() ? std::nullopt : tokenToId(content);
  };
  bos_id_ = configured("bos_token");
  eos_id_ = configured("eos_token");
  if (!bos_id_ && post_processor_ && !post_processor_->prefixIds().empty()) {
    bos_id_ = post_processor_->prefixIds().front();
  }
  if (eos_id_) return;
  for (const char* name : kCommonEosTokens) {
    const AddedToken* token = added_.byContent(name);
    if (token && token->special) {
      eos_id_ = token->id;
      return;
    }
  }
}

// Added tokens are cut out twice, as HF does: those with normalized=false
// from the raw text, the others from each piece after normalization.
std::vector<TextRun> HfTokenizer::splitOnAddedTokens(const std::string& text) const {
  std::vector<TextRun> runs;
  for (TextRun& raw : added_.split({text, std::nullopt, true}, /*normalized=*/false)) {
    if (raw.token_id) {
      runs.push_back(std::move(raw));
      continue;
    }
    if (normalizer_) raw.text = normalizer_->normalize(raw.text);
    for (TextRun& run : added_.split(raw, /*normalized=*/true)) runs.push_back(std::move(run));
  }
  return runs;
}

void HfTokenizer::encodePlain(const TextRun& run, std::vector<int64_t>& ids) const {
  for (const PreToken& piece : preTokenize(pre_tokenizer_.get(), {{run.text, run.at_text_start}})) {
    model_->encodeWord(piece.text, ids);
  }
}

std::vector<int64_t> HfTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  // Invalid UTF-8 is repaired (U+FFFD) rather than rejected: HF only ever
  // sees valid strings, and a prompt with a stray byte should still encode.
  for (const TextRun& run : splitOnAddedTokens(utf8Lossy(text))) {
    if (run.token_id) {
      ids.push_back(*run.token_id);
    } else {
      encodePlain(run, ids);
    }
  }
  if (add_special_tokens && post_processor_) ids = post_processor_->process(std::move(ids));
  return ids;
}

const std::string& HfTokenizer::tokenStringOrThrow(int64_t id, const char* what) const {
  if (const AddedToken* added = added_.byId(id)) return added->content;
  if (const std::string* token = model_->idToToken(id)) return *token;
  const std::string size = " (vocabulary size " + std::to_string(vocab_size_) + ")";
  if (id < 0 || id >= vocab_size_) {
    fail(what, "token id " + std::to_string(id) + " is outside the vocabulary" + size);
  }
  fail(what, "token id " + std::to_string(id) + " has no token" + size);
}

namespace {
// Ids past the tokenizer's vocabulary have no text: real Qwen2/Qwen3
// checkpoints pad their embedding matrix beyond the tokenizer, and a model may
// still produce such an id. They show as a visible placeholder instead of
// failing a whole run.
std::string paddedIdText(int64_t id) { return "<id " + std::to_string(id) + ">"; }
}  // namespace

bool HfTokenizer::hasText(int64_t id) const {
  return added_.byId(id) != nullptr || model_->idToToken(id) != nullptr;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string text;
  std::vector<std::string> run;  // tokens decoded together, up to a padded id
  for (const int64_t id : ids) {
    if (id < 0) tokenStringOrThrow(id, "decode");  // throws: never a valid id
    if (!hasText(id)) {
      text += decodeTokens(decoder_.get(), std::move(run)) + paddedIdText(id);
      run.clear();
      continue;
    }
    if (!(skip_special_tokens && isSpecial(id))) run.push_back(tokenStringOrThrow(id, "decode"));
  }
  return text + decodeTokens(decoder_.get(), std::move(run));
}

std::string HfTokenizer::tokenString(int64_t id) const {
  return tokenStringOrThrow(id, "tokenString");
}

std::string HfTokenizer::tokenText(int64_t id) const {
  if (id >= 0 && !hasText(id)) return paddedIdText(id);
  const std::string& token = tokenStringOrThrow(id, "tokenText");
  if (isSpecial(id) || !decoder_) return token;
  return decoder_->tokenText(token);
}

std::optional<int64_t> HfTokenizer::tokenToId(const std::string& token) const {
  if (const AddedToken* added = added_.byContent(token)) return added->id;
  return model_->tokenToId(token);
}

bool HfTokenizer::isSpecial(int64_t id) const {
  const AddedToken* added = added_.byId(id);
  return added && added->special;
}

}  // namespace kvscope
