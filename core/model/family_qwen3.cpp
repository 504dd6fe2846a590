// Qwen3: Llama's layout with an explicit head_dim (q_proj may be wider than
// hidden), attention_bias switching q/k/v and o biases together, and a
// per-head RMSNorm on q and k (weights [head_dim]) before the rotary embedding.
#include "core/model/decoder_family.h"

namespace kvscope {

const std::vector<LayerWeightSpec>& qwen3LayerWeights() {
  using W = DecoderLayerWeights;
  static const std::vector<LayerWeightSpec> specs = [] {
    std::vector<LayerWeightSpec> s = llamaLayerWeights();
    s.push_back({"self_attn.q_norm.weight", &W::q_norm, shapes::headDim, nullptr});
    s.push_back({"self_attn.k_norm.weight", &W::k_norm, shapes::headDim, nullptr});
    return s;
  }();
  return specs;
}

}  // namespace kvscope
