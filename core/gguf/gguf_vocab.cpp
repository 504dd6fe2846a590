#include "core/gguf/gguf_vocab.h"

#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/model/json_limits.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope {

namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// The split regexes of tokenizer.json files that llama.cpp implements under a
// pre-tokenizer name (its llama-vocab.cpp carries each as "original regex").
const char* const kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const std::string kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space

std::string field(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}
bool flag(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); }
bool isNull(const json& j, const char* key) { return !j.contains(key) || j[key].is_null(); }

struct Tokens {
  std::vector<std::string> text;
  std::vector<int32_t> type;
  std::vector<float> score;
};

// The vocabulary and the added tokens, by id, padded to vocab_size.
Tokens vocabularyOf(const json& tok, int64_t vocab_size, const std::string& ctx) {
  const json& vocab = tok["model"]["vocab"];
  if (!vocab.is_object()) fail(ctx, "model.vocab is not an object");
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer()) fail(ctx, "model.vocab['" + text + "'] is not an integer id");
    by_id[id.get<int64_t>()] = {text, kNormal};
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& a : tok["added_tokens"]) {
      const int64_t id = a.value("id", int64_t{-1});
      by_id[id] = {field(a, "content"), flag(a, "special") ? kControl : kUserDefined};
    }
  }
  if (by_id.empty()) fail(ctx, "the vocabulary is empty");
  if (by_id.begin()->first < 0 || by_id.rbegin()->first >= vocab_size)
    fail(ctx, "token id " + std::to_string(by_id.rbegin()->first) + " is outside the model's vocab_size " +
                  std::to_string(vocab_size) + " (llama.cpp needs one embedding row per token)");
  Tokens t;
  t.text.resize(vocab_size);
  t.type.assign(vocab_size, kUnused);
  t.score.assign(vocab_size, 0.0f);
  std::set<std::string> seen;
  for (int64_t i = 0; i < vocab_size; ++i) {
    const auto it = by_id.find(i);
    if (it == by_id.end()) {
      t.text[i] = "[PAD" + std::to_string(i) + "]";  // an embedding row no token uses
    } else {
      t.text[i] = it->second.first;
      t.type[i] = it->second.second;
    }
    if (!seen.insert(t.text[i]).second) fail(ctx, "token text '" + t.text[i] + "' has two ids");
  }
  return t;
}

std::vector<std::pair<std::string, std::string>> mergesOf(const json& model, const std::string& ctx) {
  std::vector<std::pair<std::string, std::string>> merges;
  if (!model.contains("merges") || !model["merges"].is_array()) fail(ctx, "model.merges is missing");
  for (const auto& m : model["merges"]) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) fail(ctx, "merge '" + s + "' is not two tokens");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(ctx, "a merge is neither \"a b\" nor [a, b]");
    }
  }
  return merges;
}

// The BPE model settings llama.cpp's BPE and SPM tokenizers share.
void requirePlainBpe(const json& model, const std::string& ctx) {
  if (field(model, "type") != "BPE") fail(ctx, "model.type '" + field(model, "type") + "' (only BPE vocabularies are exported)");
  if (!isNull(model, "dropout")) fail(ctx, "BPE dropout is set (llama.cpp has no dropout)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!field(model, k).empty()) fail(ctx, std::string("model.") + k + " is set (llama.cpp has no subword affixes)");
}

// tokenizer.json's pre-tokenizer, as the llama.cpp pre-tokenizer name that
// splits text the same way, or a refusal naming what differs.
std::string preTokenizerName(const json& tok, bool ignore_merges, const std::string& ctx) {
  const json& pre = tok["pre_tokenizer"];
  if (field(pre, "type") == "ByteLevel") {
    if (flag(pre, "add_prefix_space")) fail(ctx, "ByteLevel add_prefix_space is true (llama.cpp prepends no space)");
    if (pre.contains("use_regex") && !flag(pre, "use_regex")) fail(ctx, "ByteLevel without its regex splits nothing; llama.cpp always splits");
    if (ignore_merges) fail(ctx, "ignore_merges with GPT-2's regex (llama.cpp's gpt-2 pre-tokenizer applies every merge)");
    return "gpt-2";
  }
  if (field(pre, "type") == "Sequence" && pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2) {
    const json& split = pre["pretokenizers"][0];
    const json& bytes = pre["pretokenizers"][1];
    const bool plain_bytes = field(bytes, "type") == "ByteLevel" && !flag(bytes, "use_regex") && !flag(bytes, "add_prefix_space");
    const bool isolated = field(split, "type") == "Split" && field(split, "behavior") == "Isolated" && !flag(split, "invert");
    const std::string regex = split.contains("pattern") ? field(split["pattern"], "Regex") : "";
    if (plain_bytes && isolated && regex == kLlama3Regex) return ignore_merges ? "llama-bpe" : "smaug-bpe";
    if (plain_bytes && isolated && regex == kQwen2Regex) {
      if (ignore_merges) fail(ctx, "ignore_merges with Qwen2's regex (llama.cpp's qwen2 pre-tokenizer applies every merge)");
      return "qwen2";
    }
    fail(ctx, "pre_tokenizer splits with a regex llama.cpp has no pre-tokenizer for: " + regex);
  }
  fail(ctx, "pre_tokenizer " + pre.dump().substr(0, 120) + " has no llama.cpp equivalent");
}

// ---- sentencepiece-style BPE ----

bool isByteToken(const std::string& t) {
  return t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

std::vector<size_t> charBoundaries(const std::string& s) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) cuts.push_back(i);
  return cuts;
}

// llama.cpp's SPM merges the adjacent pair whose concatenation is in the
// vocabulary with the highest score; tokenizer.json merges the pair of lowest
// rank. Scoring each token by its first merge's rank makes the two agree when
// every concatenation of two tokens that is a token is a merge, and the merges
// making one token have neighbouring ranks (true of vocabularies converted
// from sentencepiece, whose merges follow the merged pieces' order).
void scoreSentencepieceMerges(Tokens& t, const std::vector<std::pair<std::string, std::string>>& merges, const std::string& ctx) {
  std::map<std::string, int64_t> id_of;
  for (size_t i = 0; i < t.text.size(); ++i) id_of[t.text[i]] = static_cast<int64_t>(i);
  std::set<std::pair<std::string, std::string>> merge_set(merges.begin(), merges.end());
  std::map<std::string, std::vector<int64_t>> ranks;
  for (size_t r = 0; r < merges.size(); ++r) ranks[merges[r].first + merges[r].second].push_back(static_cast<int64_t>(r));
  for (const auto& [text, rs] : ranks) {
    const auto it = id_of.find(text);
    if (it == id_of.end()) fail(ctx, "merge result '" + text + "' is not in the vocabulary");
    if (rs.back() - rs.front() != static_cast<int64_t>(rs.size()) - 1)
      fail(ctx, "token '" + text + "' is made by merges of ranks " + std::to_string(rs.front()) + " and " + std::to_string(rs.back()) +
                    " with other merges between them (llama.cpp's score order cannot express that)");
    t.score[it->second] = -static_cast<float>(rs.front()) - 1.0f;
  }
  for (size_t i = 0; i < t.text.size(); ++i) {
    if (t.type[i] != kNormal) continue;
    const std::string& s = t.text[i];
    for (const size_t cut : charBoundaries(s)) {
      const std::string l = s.substr(0, cut), r = s.substr(cut);
      if (id_of.count(l) && id_of.count(r) && !merge_set.count({l, r}))
        fail(ctx, "'" + l + "' + '" + r + "' makes the token '" + s + "' but is not a merge (llama.cpp's SPM would merge it)");
    }
  }
}

GgufVocab sentencepieceVocab(const json& tok, int64_t vocab_size, const std::string& ctx) {
  const json& model = tok["model"];
  const json& norm = tok["normalizer"];
  bool prefix = false, escape = false;
  const json steps = field(norm, "type") == "Sequence" ? norm["normalizers"] : json::array({norm});
  for (const auto& s : steps) {
    if (field(s, "type") == "Prepend" && field(s, "prepend") == kSpace) prefix = true;
    else if (field(s, "type") == "Replace" && field(s["pattern"], "String") == " " && field(s, "content") == kSpace) escape = true;
    else fail(ctx, "normalizer step " + s.dump().substr(0, 80) + " has no llama.cpp equivalent");
  }
  if (!escape) fail(ctx, "a byte-fallback vocabulary whose normalizer does not write spaces as U+2581");
  if (!tok["pre_tokenizer"].is_null()) fail(ctx, "a sentencepiece-style vocabulary with a pre_tokenizer (llama.cpp's SPM splits nothing)");
  Tokens t = vocabularyOf(tok, vocab_size, ctx);
  int64_t unk = -1;
  const std::string unk_text = field(model, "unk_token");
  for (size_t i = 0; i < t.text.size(); ++i) {
    if (t.type[i] == kUnused) continue;
    if (t.text[i] == unk_text) {
      t.type[i] = kUnknown;
      unk = static_cast<int64_t>(i);
    } else if (isByteToken(t.text[i]) && t.type[i] == kNormal) {
      t.type[i] = kByte;
    }
  }
  scoreSentencepieceMerges(t, mergesOf(model, ctx), ctx);
  GgufVocab v;
  v.model = "llama";
  v.pre = "default";
  v.metadata.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(prefix));
  if (unk >= 0) v.metadata.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(unk)));
  v.metadata.emplace_back("tokenizer.ggml.tokens", GgufValue::stringArray(t.text));
  v.metadata.emplace_back("tokenizer.ggml.scores", GgufValue::f32Array(t.score));
  v.metadata.emplace_back("tokenizer.ggml.token_type", GgufValue::i32Array(t.type));
  v.tokens = vocab_size;
  return v;
}

// ---- byte-level BPE ----

GgufVocab byteLevelVocab(const json& tok, int64_t vocab_size, const std::string& ctx) {
  const json& model = tok["model"];
  const json& norm = tok["normalizer"];
  // NFC: llama.cpp does not normalize, so text already in NFC (nearly all
  // text) tokenizes the same; docs/llamacpp.md says so.
  if (!norm.is_null() && field(norm, "type") != "NFC")
    fail(ctx, "normalizer " + norm.dump().substr(0, 80) + " has no llama.cpp equivalent");
  if (flag(model, "byte_fallback")) fail(ctx, "byte_fallback in a byte-level vocabulary");
  GgufVocab v;
  v.model = "gpt2";
  v.pre = preTokenizerName(tok, flag(model, "ignore_merges"), ctx);
  Tokens t = vocabularyOf(tok, vocab_size, ctx);
  std::vector<std::string> merges;
  for (const auto& [a, b] : mergesOf(model, ctx)) {
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
      fail(ctx, "merge '" + a + "' '" + b + "' holds a space (llama.cpp's merge list separates with one)");
    merges.push_back(a + " " + b);
  }
  v.metadata.emplace_back("tokenizer.ggml.tokens", GgufValue::stringArray(t.text));
  v.metadata.emplace_back("tokenizer.ggml.token_type", GgufValue::i32Array(t.type));
  v.metadata.emplace_back("tokenizer.ggml.merges", GgufValue::stringArray(merges));
  v.tokens = vocab_size;
  return v;
}

// add_bos / add_eos: what tokenizer.json's post-processor wraps a single text in.
std::pair<bool, bool> specialWrapping(const json& tok) {
  const json& post = tok["post_processor"];
  if (field(post, "type") != "TemplateProcessing" || !post["single"].is_array() || post["single"].empty()) return {false, false};
  const json& single = post["single"];
  return {single.front().contains("SpecialToken"), single.back().contains("SpecialToken")};
}

}  // namespace

GgufVocab convertVocab(const std::string& model_dir, int64_t vocab_size, int64_t bos_id, int64_t eos_id) {
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  const std::string ctx = "exporting the tokenizer " + path;
  if (!std::filesystem::exists(path)) fail(ctx, "no tokenizer.json (llama.cpp needs the vocabulary inside the GGUF)");
  const json tok = readJsonFileWithLimits(path, kTokenizerJsonLimits);
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) fail(ctx, "no model object");
  requirePlainBpe(tok["model"], ctx);
  GgufVocab v = flag(tok["model"], "byte_fallback") ? sentencepieceVocab(tok, vocab_size, ctx) : byteLevelVocab(tok, vocab_size, ctx);
  const auto [add_bos, add_eos] = specialWrapping(tok);
  GgufMetadata head{{"tokenizer.ggml.model", GgufValue::string(v.model)}, {"tokenizer.ggml.pre", GgufValue::string(v.pre)}};
  if (bos_id >= 0) head.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos_id)));
  if (eos_id >= 0) head.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(eos_id)));
  head.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(add_bos));
  head.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(add_eos));
  v.metadata.insert(v.metadata.begin(), head.begin(), head.end());
  return v;
}

namespace {

constexpr const char* kTokenizerPrefix = "tokenizer.ggml.";

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What a value is, for "must be X, not Y" messages.
std::string kindOf(const GgufValue& v) { return std::string(v.is_array ? "an array of " : "a ") + ggufTypeName(v.type); }

// The per-token arrays: `type` elements, one per token.
void checkPerToken(const GgufFile& file, const std::string& key, GgufType type, size_t tokens) {
  const GgufValue* v = file.find(key);
  if (!v) return;
  if (!v->is_array || v->type != type) throw Error(key + " must be an array of " + ggufTypeName(type) + ", not " + kindOf(*v));
  if (v->size() != tokens)
    throw Error(key + " has " + std::to_string(v->size()) + " entries for the " + std::to_string(tokens) +
                " tokens of tokenizer.ggml.tokens (one per token)");
}

void checkTokenTypes(const GgufFile& file) {
  const GgufValue* v = file.find("tokenizer.ggml.token_type");
  if (!v) return;
  for (size_t i = 0; i < v->ints.size(); ++i)
    if (v->ints[i] < 0 || v->ints[i] > kByte)
      throw Error("tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(v->ints[i]) +
                  " (llama.cpp's token types are 0-6)");
}

void checkMerges(const GgufFile& file) {
  const GgufValue* v = file.find("tokenizer.ggml.merges");
  if (!v) return;
  if (!v->is_array || v->type != GgufType::STRING)
    throw Error("tokenizer.ggml.merges must be an array of strings, not " + kindOf(*v));
  for (size_t i = 0; i < v->strings.size(); ++i)
    if (v->strings[i].find(' ', 1) == std::string::npos)
      throw Error("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + visibleText(v->strings[i].substr(0, 80)) +
                  "' is not two tokens separated by a space");
}

// tokenizer.ggml.bos_token_id, eos_, unknown_, padding_, ...: ids of the vocabulary.
void checkSpecialIds(const GgufFile& file, size_t tokens) {
  for (const auto& [key, v] : file.metadata) {
    if (key.rfind(kTokenizerPrefix, 0) != 0 || !endsWith(key, "_token_id")) continue;
    if (v.is_array || v.ints.size() != 1) throw Error(key + " must be an integer, not " + kindOf(v));
    if (v.ints[0] < 0 || static_cast<uint64_t>(v.ints[0]) >= tokens)
      throw Error(key + " " + std::to_string(v.ints[0]) + " is outside the vocabulary of " + std::to_string(tokens) + " tokens");
  }
}

}  // namespace

int64_t checkGgufVocab(const GgufFile& file) {
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (const GgufValue* model = file.find("tokenizer.ggml.model"); model && (model->is_array || model->type != GgufType::STRING))
    throw Error("tokenizer.ggml.model must be a string, not " + kindOf(*model));
  if (!tokens) {
    for (const auto& [key, v] : file.metadata)
      if (key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type" || key == "tokenizer.ggml.merges" ||
          (key.rfind(kTokenizerPrefix, 0) == 0 && endsWith(key, "_token_id")))
        throw Error("'" + visibleText(key) + "' without tokenizer.ggml.tokens (the vocabulary it refers to)");
    return 0;
  }
  if (!tokens->is_array || tokens->type != GgufType::STRING)
    throw Error("tokenizer.ggml.tokens must be an array of strings, not " + kindOf(*tokens));
  if (tokens->strings.empty()) throw Error("tokenizer.ggml.tokens is empty");
  const size_t n = tokens->strings.size();
  checkPerToken(file, "tokenizer.ggml.scores", GgufType::F32, n);
  checkPerToken(file, "tokenizer.ggml.token_type", GgufType::I32, n);
  checkTokenTypes(file);
  checkMerges(file);
  checkSpecialIds(file, n);
  return static_cast<int64_t>(n);
}

}  // namespace kvscope
