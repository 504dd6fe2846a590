#pragma once
// The parts of a Hugging Face config.json that decide the forward pass, for
// GPT2LMHeadModel and the Llama family (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

enum class Architecture { Gpt2, Llama };

// rope_scaling: none, "linear" (positions divided by factor) or "llama3"
// (long wavelengths divided by factor, short kept, smooth in between).
struct RopeScaling {
  enum class Type { None, Linear, Llama3 };
  Type type = Type::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3 only
  double high_freq_factor = 4.0;  // llama3 only
  int64_t original_max_position_embeddings = 8192;  // llama3 only
};

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  std::string architecture_name;  // e.g. "LlamaForCausalLM"
  std::string model_type;         // e.g. "llama", "qwen2", "gpt2"

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads for MHA, 1 for MQA
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;

  std::string activation;  // "silu", "gelu_new", "gelu", "relu"
  double norm_eps = 1e-5;  // rms_norm_eps or layer_norm_epsilon
  bool tie_word_embeddings = false;

  // Llama family
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qkv_bias = false;  // Qwen2, or attention_bias
  bool o_bias = false;    // attention_bias
  bool mlp_bias = false;

  // GPT-2
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;

  std::vector<int64_t> bos_token_ids;  // may be empty
  std::vector<int64_t> eos_token_ids;  // may be empty

  // Longest sequence the model may see (max_position_embeddings).
  int64_t contextLength() const { return max_position_embeddings; }
  int64_t groupSize() const { return num_heads / num_kv_heads; }
};

// Parses a config.json object; `source` names the file in error messages.
// Throws Error for an unsupported architecture or rope type, or a missing or
// inconsistent field.
ModelConfig parseModelConfig(const nlohmann::json& json, const std::string& source);
ModelConfig loadModelConfig(const std::string& config_json_path);

// Adds eos/bos ids from generation_config.json when present (HF's generate()
// reads EOS from there first). Missing file: no change.
void mergeGenerationConfig(ModelConfig& config, const std::string& generation_config_path);

std::string describe(const ModelConfig& config);

}  // namespace kvscope
