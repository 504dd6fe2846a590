#include "core/model/model_bundle.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace kvscope {

bool ModelBundle::isEos(int64_t id) const {
  return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
}

ModelBundle loadModelBundle(const std::string& dir, const c10::TensorOptions& options) {
  ModelBundle bundle;
  bundle.dir = dir;
  bundle.model = loadCausalLM(dir, options);
  bundle.tokenizer = Tokenizer::fromDirectory(dir);
  const int64_t model_vocab = bundle.model->config().vocab_size;
  if (bundle.tokenizer->vocabSize() > model_vocab) {
    fail(dir, "the tokenizer has " + std::to_string(bundle.tokenizer->vocabSize()) +
                  " ids but the model's vocabulary has only " + std::to_string(model_vocab));
  }
  bundle.eos_ids = bundle.model->config().eos_token_ids;
  if (auto eos = bundle.tokenizer->eosId(); eos && !bundle.isEos(*eos)) bundle.eos_ids.push_back(*eos);
  return bundle;
}

}  // namespace kvscope
