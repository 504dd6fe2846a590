#pragma once
// Tokenizer loaded from a Hugging Face tokenizer.json: byte-level BPE
// (GPT-2, Qwen2, Llama-3 pre-tokenizers) and BPE with byte fallback and the
// "▁" space convention (Llama-2, TinyLlama, Mistral). Added/special tokens,
// normalizers, the post-processor's BOS/EOS and the decoder chain follow the
// file, so ids equal what the Hugging Face tokenizer gives.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads <dir>/tokenizer.json (and tokenizer_config.json when present).
  // Throws Error naming the file and the problem (unknown model type, ...).
  static std::unique_ptr<Tokenizer> fromDirectory(const std::string& dir);
  static std::unique_ptr<Tokenizer> fromFile(const std::string& tokenizer_json_path);

  // add_special_tokens: apply the post-processor (e.g. Llama's BOS), as HF's
  // encode() does by default.
  virtual std::vector<int64_t> encode(const std::string& text,
                                      bool add_special_tokens = true) const = 0;
  // Ids past the tokenizer's vocabulary (a model's padded embedding rows)
  // decode to a visible "<id N>"; a negative id throws Error.
  virtual std::string decode(const std::vector<int64_t>& ids,
                             bool skip_special_tokens = true) const = 0;
  // Whether the id has a token here (padded model ids do not).
  virtual bool hasText(int64_t id) const = 0;
  // The vocabulary string of one id (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual std::string tokenString(int64_t id) const = 0;
  // Decoded text of a single token as it would appear in running text
  // (for per-token display); may be a partial UTF-8 sequence for byte tokens.
  virtual std::string tokenText(int64_t id) const = 0;
  virtual std::optional<int64_t> tokenToId(const std::string& token) const = 0;
  // Number of ids (max id + 1, including added tokens).
  virtual int64_t vocabSize() const = 0;
  virtual bool isSpecial(int64_t id) const = 0;
  virtual std::optional<int64_t> bosId() const = 0;
  virtual std::optional<int64_t> eosId() const = 0;
};

}  // namespace kvscope
