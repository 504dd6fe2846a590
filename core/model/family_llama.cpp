// Llama, Qwen2 and Mistral: separate q/k/v projections (biases for Qwen2 or
// attention_bias), a SiLU-gated MLP, pre-norm blocks.
#include "core/model/decoder_family.h"

namespace kvscope {

const std::vector<LayerWeightSpec>& llamaLayerWeights() {
  using W = DecoderLayerWeights;
  static const auto qkv_bias = [](const ModelConfig& c) { return c.qkv_bias; };
  static const auto o_bias = [](const ModelConfig& c) { return c.o_bias; };
  static const auto mlp_bias = [](const ModelConfig& c) { return c.mlp_bias; };
  static const std::vector<LayerWeightSpec> specs = {
      {"input_layernorm.weight", &W::input_norm, shapes::hidden, nullptr},
      {"self_attn.q_proj.weight", &W::wq, shapes::qProj, nullptr},
      {"self_attn.q_proj.bias", &W::bq, shapes::qBias, qkv_bias},
      {"self_attn.k_proj.weight", &W::wk, shapes::kvProj, nullptr},
      {"self_attn.k_proj.bias", &W::bk, shapes::kvBias, qkv_bias},
      {"self_attn.v_proj.weight", &W::wv, shapes::kvProj, nullptr},
      {"self_attn.v_proj.bias", &W::bv, shapes::kvBias, qkv_bias},
      {"self_attn.o_proj.weight", &W::wo, shapes::oProj, nullptr},
      {"self_attn.o_proj.bias", &W::bo, shapes::hidden, o_bias},
      {"post_attention_layernorm.weight", &W::post_attention_norm, shapes::hidden, nullptr},
      {"mlp.gate_proj.weight", &W::w_gate, shapes::upProj, nullptr},
      {"mlp.gate_proj.bias", &W::b_gate, shapes::intermediate, mlp_bias},
      {"mlp.up_proj.weight", &W::w_up, shapes::upProj, nullptr},
      {"mlp.up_proj.bias", &W::b_up, shapes::intermediate, mlp_bias},
      {"mlp.down_proj.weight", &W::w_down, shapes::downProj, nullptr},
      {"mlp.down_proj.bias", &W::b_down, shapes::hidden, mlp_bias},
  };
  return specs;
}

}  // namespace kvscope
