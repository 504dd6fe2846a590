// Phi-3: one fused qkv_proj whose rows are [q | k | v] and one fused
// gate_up_proj whose rows are [gate | up]; no biases.
#include "core/model/decoder_family.h"

namespace kvscope {

const std::vector<LayerWeightSpec>& phi3LayerWeights() {
  using W = DecoderLayerWeights;
  static const auto qkv = [](const ModelConfig& c) -> std::vector<int64_t> {
    return {(c.num_heads + 2 * c.num_kv_heads) * c.head_dim, c.hidden_size};
  };
  static const auto gate_up = [](const ModelConfig& c) -> std::vector<int64_t> {
    return {2 * c.intermediate_size, c.hidden_size};
  };
  static const std::vector<LayerWeightSpec> specs = {
      {"input_layernorm.weight", &W::input_norm, shapes::hidden, nullptr},
      {"self_attn.qkv_proj.weight", &W::w_qkv, qkv, nullptr},
      {"self_attn.o_proj.weight", &W::wo, shapes::oProj, nullptr},
      {"post_attention_layernorm.weight", &W::post_attention_norm, shapes::hidden, nullptr},
      {"mlp.gate_up_proj.weight", &W::w_gate_up, gate_up, nullptr},
      {"mlp.down_proj.weight", &W::w_down, shapes::downProj, nullptr},
  };
  return specs;
}

}  // namespace kvscope
