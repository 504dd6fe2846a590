#include "core/model/decoder_family.h"

namespace kvscope {

const std::vector<LayerWeightSpec>& layerWeightSpecs(DecoderFamily family) {
  switch (family) {
    case DecoderFamily::Llama: return llamaLayerWeights();
    case DecoderFamily::Qwen3: return qwen3LayerWeights();
    case DecoderFamily::Gemma2: return gemma2LayerWeights();
    case DecoderFamily::Phi3: return phi3LayerWeights();
  }
  return llamaLayerWeights();
}

namespace shapes {
std::vector<int64_t> hidden(const ModelConfig& c) { return {c.hidden_size}; }
std::vector<int64_t> headDim(const ModelConfig& c) { return {c.head_dim}; }
std::vector<int64_t> qProj(const ModelConfig& c) { return {c.num_heads * c.head_dim, c.hidden_size}; }
std::vector<int64_t> kvProj(const ModelConfig& c) { return {c.num_kv_heads * c.head_dim, c.hidden_size}; }
std::vector<int64_t> qBias(const ModelConfig& c) { return {c.num_heads * c.head_dim}; }
std::vector<int64_t> kvBias(const ModelConfig& c) { return {c.num_kv_heads * c.head_dim}; }
std::vector<int64_t> oProj(const ModelConfig& c) { return {c.hidden_size, c.num_heads * c.head_dim}; }
std::vector<int64_t> upProj(const ModelConfig& c) { return {c.intermediate_size, c.hidden_size}; }
std::vector<int64_t> downProj(const ModelConfig& c) { return {c.hidden_size, c.intermediate_size}; }
std::vector<int64_t> intermediate(const ModelConfig& c) { return {c.intermediate_size}; }
}  // namespace shapes

}  // namespace kvscope
