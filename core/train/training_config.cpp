#include "core/train/training_config.h"

#include <cmath>

#include "core/error.h"
#include "core/model/checkpoint.h"

namespace kvscope {
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

nlohmann::json llamaTrainingConfig(const nlohmann::json& arch, const Tokenizer& tokenizer, const std::string& source) {
  if (!arch.is_object()) fail(source, "the architecture config must be a JSON object");
  if (arch.contains("architectures")) {
    const auto& a = arch["architectures"];
    if (!a.is_array() || a.size() != 1 || a[0] != "LlamaForCausalLM") {
      fail(source, "train builds LlamaForCausalLM models only");
    }
  }
  if (arch.contains("model_type") && arch["model_type"] != "llama") fail(source, "train builds model_type 'llama' only");
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}) {
    if (!arch.contains(key)) fail(source, std::string("missing required field '") + key + "'");
  }
  const auto bos = tokenizer.bosId(), eos = tokenizer.eosId();
  if (!bos || !eos) fail(source, "the tokenizer must define BOS and EOS tokens");

  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", 512},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},
                      {"rope_scaling", nullptr},
                      {"tie_word_embeddings", true},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"mlp_bias", false},
                      {"initializer_range", 0.02},
                      {"use_cache", true},
                      {"torch_dtype", "bfloat16"}};
  for (const auto& [key, value] : arch.items()) c[key] = value;
  if (!c.contains("num_key_value_heads")) c["num_key_value_heads"] = c["num_attention_heads"];
  c["vocab_size"] = tokenizer.vocabSize();
  c["bos_token_id"] = *bos;
  c["eos_token_id"] = *eos;
  const ModelConfig parsed = parseModelConfig(c, source);  // throws on anything inconsistent
  if (parsed.arch != Architecture::Llama || parsed.qkv_bias || parsed.o_bias || parsed.mlp_bias) {
    fail(source, "train supports plain Llama blocks (no biases)");
  }
  c["head_dim"] = parsed.head_dim;
  return c;
}

NamedTensors initialWeights(const ModelConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  const double std = 0.02, residual_std = std / std::sqrt(2.0 * static_cast<double>(config.num_layers));
  NamedTensors weights;
  for (const TensorSpec& spec : expectedTensors(config)) {
    at::Tensor t;
    if (spec.shape.size() == 1) {
      t = endsWith(spec.name, "norm.weight") ? torch::ones(spec.shape) : torch::zeros(spec.shape);
    } else {
      const bool residual = endsWith(spec.name, "o_proj.weight") || endsWith(spec.name, "down_proj.weight");
      t = torch::randn(spec.shape) * (residual ? residual_std : std);
    }
    weights.emplace_back(spec.name, t);
  }
  return weights;
}

int64_t copyMatchingWeights(NamedTensors& weights, const std::string& dir) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  int64_t copied = 0;
  for (auto& [name, tensor] : weights) {
    if (!ckpt.has(name)) continue;
    at::Tensor source = ckpt.load(name, tensor.options());
    if (source.sizes() != tensor.sizes()) continue;
    tensor = source;
    ++copied;
  }
  return copied;
}

}  // namespace kvscope
