// Gemma 2: Llama's projections, with four norms per layer: input_layernorm
// before attention, post_attention_layernorm after it (before the residual),
// pre_feedforward_layernorm / post_feedforward_layernorm around the MLP.
// Its RMSNorm multiplies by (1 + w); the block wiring is in llama_model.cpp.
#include "core/model/decoder_family.h"

namespace kvscope {

const std::vector<LayerWeightSpec>& gemma2LayerWeights() {
  using W = DecoderLayerWeights;
  static const std::vector<LayerWeightSpec> specs = [] {
    std::vector<LayerWeightSpec> s = llamaLayerWeights();
    s.push_back({"pre_feedforward_layernorm.weight", &W::pre_ff_norm, shapes::hidden, nullptr});
    s.push_back({"post_feedforward_layernorm.weight", &W::post_ff_norm, shapes::hidden, nullptr});
    return s;
  }();
  return specs;
}

}  // namespace kvscope
