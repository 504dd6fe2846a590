#include "core/model/tokenizer/bpe_model.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/tokenizer_json.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

// Ids index a table, so a corrupt file with a huge id must not make us
// allocate gigabytes; real vocabularies are dense.
constexpr int64_t kMaxIdBeyondCount = int64_t{1} << 20;
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 200000;

// "<0x0A>": the spelling of byte-fallback tokens.
std::string byteTokenName(unsigned char byte) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", byte);
  return name;
}

std::optional<std::string> optionalString(const nlohmann::json& node, const char* key) {
  const auto it = node.find(key);
  if (it == node.end() || it->is_null()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::unique_ptr<BpeModel> BpeModel::fromJson(const nlohmann::json& model,
                                             const std::string& context) {
  if (!model.is_object()) fail(context, "\"model\" must be a JSON object");
  // Old files omit the type; a merges list then means BPE.
  const std::string type = model.contains("type") ? model.at("type").get<std::string>()
                           : model.contains("merges") ? "BPE" : "";
  if (type.empty()) fail(context, "tokenizer model has no \"type\"");
  if (type != "BPE") fail(context, "unsupported tokenizer model type '" + type + "'");
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  bpe->byte_fallback_ = valueOr(model, "byte_fallback", false);
  bpe->fuse_unk_ = valueOr(model, "fuse_unk", false);
  bpe->ignore_merges_ = valueOr(model, "ignore_merges", false);
  bpe->continuing_subword_prefix_ = optionalString(model, "continuing_subword_prefix");
  bpe->end_of_word_suffix_ = optionalString(model, "end_of_word_suffix");
  bpe->readVocab(model.at("vocab"), context);
  // Merges need the vocabulary and the subword prefix.
  bpe->readMerges(model.contains("merges") ? model.at("merges") : nlohmann::json::array(),
                  context);
  // A missing unk token only means unknown characters are dropped, as in HF.
  const std::string unk = valueOr<std::string>(model, "unk_token", "");
  if (!unk.empty()) bpe->unk_id_ = bpe->tokenToId(unk);
  // "dropout" is ignored on purpose: a debugger wants deterministic ids.
  return bpe;
}

void BpeModel::readVocab(const nlohmann::json& vocab, const std::string& context) {
  if (!vocab.is_object()) fail(context, "model \"vocab\" must be an object of token: id");
  const int64_t max_id = static_cast<int64_t>(vocab.size()) + kMaxIdBeyondCount;
  for (const auto& [token, id_json] : vocab.items()) {
    const int64_t id = jsonInteger(id_json, context, "model.vocab: token '" + token + "' id", 0, max_id);
    vocab_[token] = id;
    if (id >= idLimit()) {
      tokens_.resize(id + 1);
      has_token_.resize(id + 1, false);
    }
    tokens_[id] = token;
    has_token_[id] = true;
  }
}

void BpeModel::readMerges(const nlohmann::json& merges, const std::string& context) {
  if (!merges.is_array()) fail(context, "model \"merges\" must be a list");
  int rank = 0;
  for (const auto& merge : merges) {
    if (merge.is_string()) {
      // "a b": exactly one space separates the two tokens.
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        fail(context, "merge #" + std::to_string(rank) + " '" + text + "' is not 'a b'");
      }
      addMerge(text.substr(0, space), text.substr(space + 1), rank, context);
    } else if (merge.is_array() && merge.size() == 2) {
      const std::string where = "model.merges[" + std::to_string(rank) + "]";
      addMerge(jsonString(merge[0], context, where + "[0]"), jsonString(merge[1], context, where + "[1]"),
               rank, context);
    } else {
      fail(context, "merge #" + std::to_string(rank) + " is neither 'a b' nor [a, b]");
    }
    ++rank;
  }
}

void BpeModel::addMerge(const std::string& left, const std::string& right, int rank,
                        const std::string& context) {
  const std::string where = "merge #" + std::to_string(rank) + " '" + left + " " + right + "'";
  const size_t prefix_len =
      continuing_subword_prefix_ ? continuing_subword_prefix_->size() : 0;
  if (right.size() < prefix_len) fail(context, where + " is shorter than the subword prefix");
  const std::string merged = left + right.substr(prefix_len);
  const auto left_id = tokenToId(left), right_id = tokenToId(right), merged_id = tokenToId(merged);
  if (!left_id || !right_id || !merged_id) {
    const std::string& missing = !left_id ? left : !right_id ? right : merged;
    fail(context, where + ": token '" + missing + "' is not in the vocabulary");
  }
  merges_.add(*left_id, *right_id, {rank, *merged_id});
}

std::optional<int64_t> BpeModel::tokenToId(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::idToToken(int64_t id) const {
  if (id < 0 || id >= idLimit() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

bool BpeModel::appendByteFallback(const std::string& piece, std::vector<int64_t>& symbols) const {
  std::vector<int64_t> bytes;
  for (const char c : piece) {
    const auto id = tokenToId(byteTokenName(static_cast<unsigned char>(c)));
    if (!id) return false;
    bytes.push_back(*id);
  }
  symbols.insert(symbols.end(), bytes.begin(), bytes.end());
  return true;
}

// One symbol per character; mirrors HF's BPE::merge_word, including its
// order quirk: a pending unk is emitted only when the next in-vocabulary
// character (not a byte-fallback run) or the end of the word is reached.
std::vector<int64_t> BpeModel::initialSymbols(const std::string& word) const {
  std::vector<int64_t> symbols;
  std::optional<int64_t> pending_unk;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = utf8Step(word, pos).length;
    std::string piece = word.substr(pos, length);
    if (pos > 0 && continuing_subword_prefix_) piece = *continuing_subword_prefix_ + piece;
    pos += length;
    if (pos == word.size() && end_of_word_suffix_) piece += *end_of_word_suffix_;

    if (const auto id = tokenToId(piece)) {
      if (pending_unk) symbols.push_back(*pending_unk);
      pending_unk.reset();
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_ && appendByteFallback(piece, symbols)) continue;
    if (!unk_id_) continue;  // HF drops the character
    if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
    pending_unk = unk_id_;
  }
  if (pending_unk) symbols.push_back(*pending_unk);
  return symbols;
}

std::vector<int64_t> BpeModel::encodeUncached(const std::string& word) const {
  if (ignore_merges_) {
    if (const auto id = tokenToId(word)) return {*id};
  }
  return applyMerges(initialSymbols(word), merges_);
}

void BpeModel::encodeWord(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> ids = encodeUncached(word);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(word, std::move(ids));
  }
}

}  // namespace kvscope
