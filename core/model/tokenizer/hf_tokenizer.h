#pragma once
// The Tokenizer implementation behind Tokenizer::fromFile: Hugging Face's
// pipeline, step by step. encode: cut out added tokens -> normalize ->
// pre-tokenize -> BPE per piece -> post-process. decode: ids -> token
// strings (minus special tokens if asked) -> decoder chain.
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/model/tokenizer/added_vocabulary.h"
#include "core/model/tokenizer/bpe_model.h"
#include "core/model/tokenizer/normalizer.h"
#include "core/model/tokenizer/post_processor.h"
#include "core/model/tokenizer/pre_tokenizer.h"
#include "core/model/tokenizer/token_decoder.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {

class HfTokenizer : public Tokenizer {
 public:
  // tokenizer: the parsed tokenizer.json; config: tokenizer_config.json or
  // null. context names the file in errors.
  static std::unique_ptr<HfTokenizer> fromJson(const nlohmann::json& tokenizer,
                                               const nlohmann::json& config,
                                               const std::string& context);

  std::vector<int64_t> encode(const std::string& text,
                              bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int64_t>& ids,
                     bool skip_special_tokens = true) const override;
  std::string tokenString(int64_t id) const override;
  // Whether the id has a token in this tokenizer (padded model ids do not).
  bool hasText(int64_t id) const override;
  std::string tokenText(int64_t id) const override;
  std::optional<int64_t> tokenToId(const std::string& token) const override;
  int64_t vocabSize() const override { return vocab_size_; }
  bool isSpecial(int64_t id) const override;
  std::optional<int64_t> bosId() const override { return bos_id_; }
  std::optional<int64_t> eosId() const override { return eos_id_; }

 private:
  HfTokenizer() = default;
  void readSpecialIds(const nlohmann::json& config);
  void checkPostProcessorIds(const std::string& context) const;
  std::vector<TextRun> splitOnAddedTokens(const std::string& text) const;
  void encodePlain(const TextRun& run, std::vector<int64_t>& ids) const;
  // Throws Error("<what>: token id ... outside the vocabulary ...").
  const std::string& tokenStringOrThrow(int64_t id, const char* what) const;

  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  std::unique_ptr<TextNormalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<TokenDecoder> decoder_;
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_id_;
  std::optional<int64_t> eos_id_;
};

}  // namespace kvscope
