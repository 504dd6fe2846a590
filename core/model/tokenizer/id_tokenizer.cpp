#include "core/model/tokenizer/id_tokenizer.h"

#include "core/error.h"

namespace kvscope {

IdTokenizer::IdTokenizer(int64_t vocab_size, std::string source)
    : vocab_size_(vocab_size), source_(std::move(source)) {}

std::vector<int64_t> IdTokenizer::encode(const std::string&, bool) const {
  fail(source_, "no tokenizer.json, so text cannot be turned into token ids; give the prompt as token ids");
}

std::string IdTokenizer::decode(const std::vector<int64_t>& ids, bool) const {
  std::string out;
  for (int64_t id : ids) out += tokenString(id);
  return out;
}

std::string IdTokenizer::tokenString(int64_t id) const {
  if (id < 0) fail(source_, "decode: negative token id " + std::to_string(id));
  return "<id " + std::to_string(id) + ">";
}

}  // namespace kvscope
