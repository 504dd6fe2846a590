#pragma once
// Random-weight Llama models for GUI tests that need real-size caches: the
// fixture tokenizer (llama-tiny's, 512 ids), any number of layers, a long
// context, written as a Hugging Face directory the GUI loads like any other.
// And a prompt of random ids as text, for contexts of thousands of rows.
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/model/model_config.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/train/model_writer.h"
#include "core/train/training_config.h"

namespace kvscope::ui::testing {

inline std::string fixtureTokenizerDir() { return KVSCOPE_FIXTURES "/models/llama-tiny"; }

// head_dim = hidden / heads.
struct RandomLlama {
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int kv_heads = 2;
  int context = 4096;
  uint64_t seed = 1;
};

inline void writeRandomLlama(const RandomLlama& spec, const std::string& out_dir) {
  const auto tokenizer = Tokenizer::fromDirectory(fixtureTokenizerDir());
  const nlohmann::json arch = {{"hidden_size", spec.hidden},
                               {"num_hidden_layers", spec.layers},
                               {"num_attention_heads", spec.heads},
                               {"num_key_value_heads", spec.kv_heads},
                               {"intermediate_size", 2 * spec.hidden},
                               {"max_position_embeddings", spec.context},
                               // Untied: with tied embeddings a random model echoes its input and
                               // two random models always agree (no draft is ever rejected).
                               {"tie_word_embeddings", false}};
  const nlohmann::json config_json = llamaTrainingConfig(arch, *tokenizer, "random_model_support");
  const ModelConfig config = parseModelConfig(config_json, "random_model_support");
  const auto model = buildCausalLM(config, initialWeights(config, spec.seed),
                                   torch::TensorOptions().dtype(torch::kFloat32), "random_model_support");
  writeModelDirectory(*model, {config_json, fixtureTokenizerDir(), StDType::F32, nullptr}, out_dir);
}

// Text that the fixture tokenizer encodes to at least `tokens` ids: random
// ids (no special ones) decoded, grown until long enough.
inline std::string randomPromptText(int tokens, uint64_t seed) {
  const auto tokenizer = Tokenizer::fromDirectory(fixtureTokenizerDir());
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> id(3, 511);
  std::vector<int64_t> ids;
  std::string text;
  while (static_cast<int>(tokenizer->encode(text).size()) < tokens) {
    for (int i = 0; i < 64; ++i) ids.push_back(id(random));
    text = tokenizer->decode(ids);
  }
  return text;
}

}  // namespace kvscope::ui::testing
