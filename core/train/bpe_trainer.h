#pragma once
// Trains a byte-level BPE tokenizer (GPT-2 style) on a text and writes it as
// a standard Hugging Face tokenizer.json. Words come from the same
// pre-tokenizer the written file declares (a Llama-3-like split regex, then
// the ByteLevel byte-to-character map), so training and encoding agree.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvscope {

struct BpeTrainerOptions {
  // Total vocabulary: 256 byte tokens + merges + the special tokens.
  int64_t vocab_size = 4096;
  // A pair must occur at least this often to be merged.
  int64_t min_pair_count = 2;
  std::string bos_token = "<|bos|>";
  std::string eos_token = "<|eos|>";
};

struct BpeVocabulary {
  std::vector<std::string> tokens;                          // id -> byte-level string
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  int64_t bos_id = -1;
  int64_t eos_id = -1;
  std::string bos_token;
  std::string eos_token;
};

// Learns merges by pair counts over the pre-tokenized words of text.
// Throws Error when vocab_size cannot hold the byte alphabet and specials.
BpeVocabulary trainByteLevelBpe(const std::string& text, const BpeTrainerOptions& options);

// The pre_tokenizer node the trainer uses and the file declares.
nlohmann::json bytePreTokenizerJson();

// tokenizer.json / tokenizer_config.json contents for a trained vocabulary.
nlohmann::json tokenizerJson(const BpeVocabulary& vocab);
nlohmann::json tokenizerConfigJson(const BpeVocabulary& vocab);

// Writes tokenizer.json and tokenizer_config.json into dir (created).
void writeTokenizerFiles(const BpeVocabulary& vocab, const std::string& dir);

}  // namespace kvscope
