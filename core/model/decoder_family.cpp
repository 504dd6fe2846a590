#include "core/model/decoder_family.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/model/dense.h"
#include "core/model/few_rows.h"
#include "core/runtime/allocator_tuning.h"

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

namespace {

// parts: panels [P_i, in, 16]; biases: [P_i * 16] each or all undefined.
// Fuses them into `fused` (+ `fused_bias`) and re-points each part at its
// slice. False (nothing changed) when some part is missing or not panels.
bool fusePanels(const std::vector<at::Tensor*>& parts, const std::vector<at::Tensor*>& biases, at::Tensor& fused,
                at::Tensor& fused_bias) {
  int64_t with_bias = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i]->defined() || !isPanels(*parts[i])) return false;
    if (parts[i]->size(1) != parts[0]->size(1) || parts[i]->scalar_type() != parts[0]->scalar_type()) return false;
    with_bias += biases[i]->defined() ? 1 : 0;
  }
  if (with_bias != 0 && with_bias != static_cast<int64_t>(parts.size())) return false;
  std::vector<at::Tensor> panels, bias_parts;
  for (size_t i = 0; i < parts.size(); ++i) {
    panels.push_back(*parts[i]);
    if (with_bias) bias_parts.push_back(*biases[i]);
  }
  int64_t fused_panels = 0;
  for (const at::Tensor& part : panels) fused_panels += part.size(0);
  fused = at::empty({fused_panels, panels[0].size(1), panels[0].size(2)}, panels[0].options());  // [sum P_i, in, 16]
  adviseHugePages(fused.data_ptr(), fused.nbytes());
  at::cat_out(fused, panels, 0);
  if (with_bias) fused_bias = at::cat(bias_parts, 0);  // [sum P_i * 16]
  int64_t first = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t count = parts[i]->size(0);
    *parts[i] = fused.narrow(0, first, count);  // a view: the checkpoint tensor, stored once
    if (with_bias) *biases[i] = fused_bias.narrow(0, first * kPanelWidth, count * kPanelWidth);
    first += count;
  }
  return true;
}

}  // namespace

void fuseProjections(DecoderLayerWeights& layer) {
  auto& w = layer;
  bool fused = false;
  if (!w.w_qkv.defined()) fused |= fusePanels({&w.wq, &w.wk, &w.wv}, {&w.bq, &w.bk, &w.bv}, w.w_qkv, w.b_qkv);
  if (!w.w_gate_up.defined()) fused |= fusePanels({&w.w_gate, &w.w_up}, {&w.b_gate, &w.b_up}, w.w_gate_up, w.b_gate_up);
#if defined(__GLIBC__)
  // The parts just freed (when the loader handed them over) sit inside the
  // heap between weights that stay (core/runtime/allocator_tuning.h keeps
  // allocations up to 32 MB there), so malloc would keep their pages: with
  // 16-bit weights every matrix is panels and every layer is fused, about
  // half the model. Handing them back costs a walk of the heap per layer.
  if (fused) malloc_trim(0);
#endif
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
