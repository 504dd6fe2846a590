#pragma once
// The stand-in for a model directory without tokenizer.json (only
// sentencepiece's tokenizer.model, or nothing): the model still runs on
// token ids, and every id shows as "<id N>", the placeholder padded
// vocabulary rows already use. Encoding text is refused with an error that
// names the directory.
#include <cstdint>
#include <string>

#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {

class IdTokenizer : public Tokenizer {
 public:
  // vocab_size: the model's vocabulary; source: the directory, for errors.
  IdTokenizer(int64_t vocab_size, std::string source);

  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = true) const override;
  bool hasText(int64_t) const override { return false; }
  std::string tokenString(int64_t id) const override;
  std::string tokenText(int64_t id) const override { return tokenString(id); }
  std::optional<int64_t> tokenToId(const std::string&) const override { return std::nullopt; }
  int64_t vocabSize() const override { return vocab_size_; }
  bool isSpecial(int64_t) const override { return false; }
  std::optional<int64_t> bosId() const override { return std::nullopt; }
  std::optional<int64_t> eosId() const override { return std::nullopt; }

 private:
  int64_t vocab_size_;
  std::string source_;
};

}  // namespace kvscope
