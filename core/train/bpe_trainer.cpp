#include "core/train/bpe_trainer.h"

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/model/tokenizer/byte_level.h"
#include "core/model/tokenizer/pre_tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;

// Llama-3's split: contractions, words with one leading non-letter, numbers
// of up to three digits, punctuation runs, newlines, other whitespace.
const char* const kSplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

using Pair = uint64_t;  // (left id << 32) | right id
Pair pairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

// Pair counts over all words, and which words hold each pair (may list a
// word more than once or after it lost the pair; checked on use).
struct PairTable {
  std::unordered_map<Pair, int64_t> count;
  std::unordered_map<Pair, std::vector<int32_t>> where;

  void add(const Word& w, int32_t index, int64_t sign) {
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      const Pair p = pairKey(w.symbols[i], w.symbols[i + 1]);
      int64_t& c = count[p];
      c += sign * w.count;
      if (c == 0) count.erase(p);
      if (sign > 0) where[p].push_back(index);
    }
  }
};

std::vector<Word> countWords(const std::string& text) {
  const auto pre = makePreTokenizer(bytePreTokenizerJson(), "bpe trainer");
  std::unordered_map<std::string, int64_t> counts;
  for (const PreToken& piece : preTokenize(pre.get(), {PreToken{text, true}})) ++counts[piece.text];
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [piece, count] : counts) {
    const auto raw = byteLevelToBytes(piece);
    require(raw.has_value(), "bpe trainer: pre-tokenizer produced a piece outside the byte-level alphabet");
    Word w;
    for (unsigned char byte : *raw) w.symbols.push_back(byte);
    w.count = count;
    words.push_back(std::move(w));
  }
  return words;
}

// Replaces every non-overlapping (a, b), left to right, with merged.
bool mergeInWord(std::vector<int32_t>& symbols, int32_t a, int32_t b, int32_t merged) {
  bool changed = false;
  size_t out = 0;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
      symbols[out++] = merged;
      ++i;
      changed = true;
    } else {
      symbols[out++] = symbols[i];
    }
  }
  symbols.resize(out);
  return changed;
}

}  // namespace

json bytePreTokenizerJson() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"},
                         {"pattern", {{"Regex", kSplitRegex}}},
                         {"behavior", "Isolated"},
                         {"invert", false}},
                        {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", false}}})}};
}

BpeVocabulary trainByteLevelBpe(const std::string& text, const BpeTrainerOptions& options) {
  const int64_t specials = 2;
  if (options.vocab_size < 256 + specials) {
    throw Error("train-tokenizer: --vocab must be at least " + std::to_string(256 + specials) +
                " (256 byte tokens and BOS/EOS), got " + std::to_string(options.vocab_size));
  }
  require(!text.empty(), "train-tokenizer: the corpus is empty");
  require(options.bos_token != options.eos_token, "train-tokenizer: BOS and EOS tokens must differ");

  BpeVocabulary vocab;
  for (int b = 0; b < 256; ++b) vocab.tokens.push_back(bytesToByteLevel(std::string(1, static_cast<char>(b))));

  std::vector<Word> words = countWords(text);
  PairTable table;
  for (size_t i = 0; i < words.size(); ++i) table.add(words[i], static_cast<int32_t>(i), +1);

  std::vector<int64_t> visited(words.size(), -1);
  const int64_t merges_wanted = options.vocab_size - 256 - specials;
  for (int64_t step = 0; step < merges_wanted && !table.count.empty(); ++step) {
    // Most frequent pair; ties go to the smaller ids (deterministic).
    Pair best = 0;
    int64_t best_count = 0;
    for (const auto& [p, c] : table.count) {
      if (c > best_count || (c == best_count && p < best)) best = p, best_count = c;
    }
    if (best_count < options.min_pair_count) break;
    const auto a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
    const auto merged = static_cast<int32_t>(vocab.tokens.size());
    vocab.tokens.push_back(vocab.tokens[a] + vocab.tokens[b]);
    vocab.merges.emplace_back(vocab.tokens[a], vocab.tokens[b]);

    const std::vector<int32_t> holders = std::move(table.where[best]);
    table.where.erase(best);
    for (int32_t index : holders) {
      if (visited[index] == step) continue;
      visited[index] = step;
      Word& w = words[index];
      std::vector<int32_t> updated = w.symbols;
      if (!mergeInWord(updated, a, b, merged)) continue;
      table.add(w, index, -1);
      w.symbols = std::move(updated);
      table.add(w, index, +1);
    }
  }
  vocab.bos_token = options.bos_token;
  vocab.eos_token = options.eos_token;
  vocab.bos_id = static_cast<int64_t>(vocab.tokens.size());
  vocab.tokens.push_back(options.bos_token);
  vocab.eos_id = static_cast<int64_t>(vocab.tokens.size());
  vocab.tokens.push_back(options.eos_token);
  return vocab;
}

json tokenizerJson(const BpeVocabulary& vocab) {
  auto special = [](int64_t id, const std::string& content) {
    return json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false},   {"normalized", false}, {"special", true}};
  };
  json vocab_map = json::object();
  for (size_t id = 0; id < vocab.tokens.size(); ++id) vocab_map[vocab.tokens[id]] = id;
  json merges = json::array();
  for (const auto& [left, right] : vocab.merges) merges.push_back(left + " " + right);

  const json bos_item = {{"SpecialToken", {{"id", vocab.bos_token}, {"type_id", 0}}}};
  const json post = {
      {"type", "TemplateProcessing"},
      {"single", json::array({bos_item, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", json::array({bos_item, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, bos_item,
                            {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
      {"special_tokens",
       {{vocab.bos_token, {{"id", vocab.bos_token}, {"ids", {vocab.bos_id}}, {"tokens", {vocab.bos_token}}}}}}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array({special(vocab.bos_id, vocab.bos_token), special(vocab.eos_id, vocab.eos_token)})},
          {"normalizer", nullptr},
          {"pre_tokenizer", bytePreTokenizerJson()},
          {"post_processor", post},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab_map},
            {"merges", merges}}}};
}

json tokenizerConfigJson(const BpeVocabulary& vocab) {
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"bos_token", vocab.bos_token},
          {"eos_token", vocab.eos_token},
          {"add_bos_token", true},
          {"add_eos_token", false},
          {"clean_up_tokenization_spaces", false},
          {"model_max_length", 1024}};
}

void writeTokenizerFiles(const BpeVocabulary& vocab, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const json& j) {
    const fs::path path = fs::path(dir) / name;
    std::ofstream out(path, std::ios::binary);
    if (!out) fail(path.string(), "cannot open for writing");
    out << j.dump(1) << "\n";
    if (!out) fail(path.string(), "write failed");
  };
  write("tokenizer.json", tokenizerJson(vocab));
  write("tokenizer_config.json", tokenizerConfigJson(vocab));
}

}  // namespace kvscope
