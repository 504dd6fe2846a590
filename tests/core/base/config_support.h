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

}  // namespace kvscope::testing_support
