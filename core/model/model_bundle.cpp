#include "core/model/model_bundle.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/model/tokenizer/id_tokenizer.h"

namespace kvscope {
namespace fs = std::filesystem;

bool ModelBundle::isEos(int64_t id) const {
  return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
}

ModelBundle loadModelBundle(const std::string& dir, const c10::TensorOptions& options, WeightResidency weights) {
  ModelBundle bundle;
  bundle.dir = dir;
  bundle.model = loadCausalLM(dir, options, weights);
  const int64_t model_vocab = bundle.model->config().vocab_size;
  bundle.has_tokenizer = fs::exists(fs::path(dir) / "tokenizer.json");
  if (bundle.has_tokenizer) {
    bundle.tokenizer = Tokenizer::fromDirectory(dir);
  } else {
    // Still useful on ids: debugging a cache needs the network, not the text.
    bundle.tokenizer = std::make_unique<IdTokenizer>(model_vocab, dir);
    spdlog::info("{}: no tokenizer.json{}; prompts must be token ids and tokens show as <id N>", dir,
                 fs::exists(fs::path(dir) / "tokenizer.model") ? " (only sentencepiece's tokenizer.model)" : "");
  }
  if (bundle.tokenizer->vocabSize() > model_vocab) {
    fail(dir, "the tokenizer has " + std::to_string(bundle.tokenizer->vocabSize()) +
                  " ids but the model's vocabulary has only " + std::to_string(model_vocab));
  }
  bundle.eos_ids = bundle.model->config().eos_token_ids;
  if (auto eos = bundle.tokenizer->eosId(); eos && !bundle.isEos(*eos)) bundle.eos_ids.push_back(*eos);
  return bundle;
}

}  // namespace kvscope
