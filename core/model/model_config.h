#pragma once
// The parts of a Hugging Face config.json that decide the forward pass, for
// GPT2LMHeadModel and the decoder families built on Llama's blocks
// (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, Qwen3ForCausalLM,
// Gemma2ForCausalLM, Phi3ForCausalLM). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

enum class Architecture { Gpt2, Llama };

// Which weight layout and block wiring a Llama-style decoder uses
// (core/model/decoder_family.h says what each one changes).
enum class DecoderFamily { Llama, Qwen3, Gemma2, Phi3 };

// rope_scaling: none, "linear" (positions divided by factor), "llama3"
// (long wavelengths divided by factor, short kept, smooth in between) or
// "longrope" (Phi-3: per-frequency factors, short or long set chosen per
// forward call by its largest position, and cos/sin scaled).
struct RopeScaling {
  enum class Type { None, Linear, Llama3, LongRope };
  Type type = Type::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3 only
  double high_freq_factor = 4.0;  // llama3 only
  int64_t original_max_position_embeddings = 8192;  // llama3, longrope
  std::vector<double> short_factor;  // longrope: head_dim / 2 entries
  std::vector<double> long_factor;
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
  DecoderFamily family = DecoderFamily::Llama;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qkv_bias = false;  // Qwen2, or attention_bias
  bool o_bias = false;    // attention_bias
  bool mlp_bias = false;
  bool qk_norm = false;                // Qwen3: per-head RMSNorm of q and k before the rotary embedding
  int64_t sliding_window = 0;          // keys a sliding layer's query sees, itself included (0: none)
  std::vector<bool> sliding_layers;    // per layer: does the window apply
  double attention_scale = 0;          // multiplies q.k (0: 1 / sqrt(head_dim))
  double attn_logit_softcap = 0;       // Gemma 2: cap * tanh(score / cap) before the mask (0: none)
  double final_logit_softcap = 0;      // Gemma 2: the same on the output logits

  // GPT-2
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;

  std::vector<int64_t> bos_token_ids;  // may be empty
  std::vector<int64_t> eos_token_ids;  // may be empty

  // Longest sequence the model may see (max_position_embeddings).
  int64_t contextLength() const { return max_position_embeddings; }
  int64_t groupSize() const { return num_heads / num_kv_heads; }
  // The window of one layer, or 0 when it attends to every earlier key.
  int64_t windowOf(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(sliding_layers.size()) && sliding_layers[layer] ? sliding_window : 0;
  }
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

// Whether kvscope implements the family a config's model_type names ("llama",
// "qwen3", ...): a checkpoint of any other type cannot be a reference.
bool implementedModelType(const std::string& model_type);

}  // namespace kvscope
