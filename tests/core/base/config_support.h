#pragma once
// A small valid Llama config.json, the starting point the config tests break.
#include <nlohmann/json.hpp>

namespace kvscope::testing_support {

inline nlohmann::json tinyLlamaConfig() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 512},
          {"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"intermediate_size", 176}, {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"bos_token_id", 1}, {"eos_token_id", 2}};
}

// A small valid GPT-2 config.json (LayerNorm, learned positions).
inline nlohmann::json tinyGpt2Config() {
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", 512}, {"n_embd", 64},
          {"n_layer", 2}, {"n_head", 4}, {"n_positions", 256}, {"layer_norm_epsilon", 1e-5}};
}

}  // namespace kvscope::testing_support
