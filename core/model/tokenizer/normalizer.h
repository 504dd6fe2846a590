#pragma once
// Normalizers from tokenizer.json ("normalizer"): they rewrite each piece of
// text between added tokens before pre-tokenization (NFC for Qwen2, the
// Prepend("▁") + Replace(" ", "▁") pair of Llama-2's legacy layout, ...).
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

// What normalization may make of n bytes: 16n + 4096. Real normalizers stay
// far below (NFKD expands a code point at most 11x in bytes, Llama's
// Replace(" ", "▁") 3x); a chain of Replace steps with an empty regex would
// otherwise grow the text exponentially (16 steps: gigabytes).
size_t maxNormalizedBytes(size_t input_bytes);

class TextNormalizer {
 public:
  virtual ~TextNormalizer() = default;
  // Throws Error naming the file when the result would pass maxNormalizedBytes.
  std::string normalize(const std::string& text) const {
    return normalizeWithin(text, maxNormalizedBytes(text.size()));
  }
  // The normalized text, or Error as soon as it would pass max_bytes.
  virtual std::string normalizeWithin(const std::string& text, size_t max_bytes) const = 0;
};

// Builds the normalizer described by node; nullptr for JSON null.
// Supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip,
// Sequence. Throws Error(context: unsupported normalizer type '...').
std::unique_ptr<TextNormalizer> makeNormalizer(const nlohmann::json& node,
                                               const std::string& context);

}  // namespace kvscope
