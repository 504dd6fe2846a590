#pragma once
// Normalizers from tokenizer.json ("normalizer"): they rewrite each piece of
// text between added tokens before pre-tokenization (NFC for Qwen2, the
// Prepend("▁") + Replace(" ", "▁") pair of Llama-2's legacy layout, ...).
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

class TextNormalizer {
 public:
  virtual ~TextNormalizer() = default;
  virtual std::string normalize(const std::string& text) const = 0;
};

// Builds the normalizer described by node; nullptr for JSON null.
// Supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip,
// Sequence. Throws Error(context: unsupported normalizer type '...').
std::unique_ptr<TextNormalizer> makeNormalizer(const nlohmann::json& node,
                                               const std::string& context);

}  // namespace kvscope
