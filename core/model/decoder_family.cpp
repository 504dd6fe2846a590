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

const std::vector<std::vector<WeightSlot>>& fusedWeightGroups() {
  using W = DecoderLayerWeights;
  static const std::vector<std::vector<WeightSlot>> groups = {{&W::wq, &W::wk, &W::wv}, {&W::w_gate, &W::w_up}};
  return groups;
}

namespace {

// The matching biases of fusedWeightGroups(), group by group.
const std::vector<std::vector<WeightSlot>>& fusedBiasGroups() {
  using W = DecoderLayerWeights;
  static const std::vector<std::vector<WeightSlot>> groups = {{&W::bq, &W::bk, &W::bv}, {&W::b_gate, &W::b_up}};
  return groups;
}

// The fused slot of each group of fusedWeightGroups() and its bias.
const std::vector<std::pair<WeightSlot, WeightSlot>>& fusedSlots() {
  using W = DecoderLayerWeights;
  static const std::vector<std::pair<WeightSlot, WeightSlot>> slots = {{&W::w_qkv, &W::b_qkv},
                                                                      {&W::w_gate_up, &W::b_gate_up}};
  return slots;
}

enum class Fusion { None, Adopted, Copied };

// panels: [P_i, in, 16] each. When each part starts where the one before it
// ends in one tensor's storage, the whole of them as one [sum P_i, in, 16]
// view; else undefined.
at::Tensor adjacentWhole(const std::vector<at::Tensor>& panels, int64_t total_panels) {
  for (size_t i = 0; i < panels.size(); ++i) {
    if (!panels[i].is_contiguous() || !panels[i].is_alias_of(panels[0])) return {};
    if (i == 0) continue;
    const auto* previous_end = static_cast<const char*>(panels[i - 1].data_ptr()) + panels[i - 1].nbytes();
    if (static_cast<const char*>(panels[i].data_ptr()) != previous_end) return {};
  }
  const int64_t in = panels[0].size(1), width = panels[0].size(2);
  return panels[0].as_strided({total_panels, in, width}, {in * width, width, 1});
}

// parts: panels [P_i, in, 16]; biases: [P_i * 16] each or all undefined.
// Fuses them into `fused` (+ `fused_bias`) and re-points each part at its
// slice. None (nothing changed) when some part is missing or not panels.
Fusion fusePanels(const std::vector<at::Tensor*>& parts, const std::vector<at::Tensor*>& biases, at::Tensor& fused,
                  at::Tensor& fused_bias) {
  int64_t with_bias = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i]->defined() || !isPanels(*parts[i])) return Fusion::None;
    if (parts[i]->size(1) != parts[0]->size(1) || parts[i]->scalar_type() != parts[0]->scalar_type()) return Fusion::None;
    with_bias += biases[i]->defined() ? 1 : 0;
  }
  if (with_bias != 0 && with_bias != static_cast<int64_t>(parts.size())) return Fusion::None;
  std::vector<at::Tensor> panels, bias_parts;
  for (size_t i = 0; i < parts.size(); ++i) {
    panels.push_back(*parts[i]);
    if (with_bias) bias_parts.push_back(*biases[i]);
  }
  int64_t fused_panels = 0;
  for (const at::Tensor& part : panels) fused_panels += part.size(0);
  fused = adjacentWhole(panels, fused_panels);
  const Fusion fusion = fused.defined() ? Fusion::Adopted : Fusion::Copied;
  if (fusion == Fusion::Copied) {
    fused = at::empty({fused_panels, panels[0].size(1), panels[0].size(2)}, panels[0].options());  // [sum P_i, in, 16]
    adviseHugePages(fused.data_ptr(), fused.nbytes());
    at::cat_out(fused, panels, 0);
  }
  if (with_bias) fused_bias = at::cat(bias_parts, 0);  // [sum P_i * 16]
  int64_t first = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t count = parts[i]->size(0);
    *parts[i] = fused.narrow(0, first, count);  // a view: the checkpoint tensor, stored once
    if (with_bias) *biases[i] = fused_bias.narrow(0, first * kPanelWidth, count * kPanelWidth);
    first += count;
  }
  return fusion;
}

}  // namespace

void fuseProjections(DecoderLayerWeights& layer) {
  bool copied = false;
  for (size_t g = 0; g < fusedWeightGroups().size(); ++g) {
    const auto [fused_slot, fused_bias_slot] = fusedSlots()[g];
    if ((layer.*fused_slot).defined()) continue;  // Phi-3: stored fused
    std::vector<at::Tensor*> parts, biases;
    for (WeightSlot slot : fusedWeightGroups()[g]) parts.push_back(&(layer.*slot));
    for (WeightSlot slot : fusedBiasGroups()[g]) biases.push_back(&(layer.*slot));
    copied |= fusePanels(parts, biases, layer.*fused_slot, layer.*fused_bias_slot) == Fusion::Copied;
  }
#if defined(__GLIBC__)
  // The parts just freed (when the loader handed them over) sit inside the
  // heap between weights that stay (core/runtime/allocator_tuning.h keeps
  // allocations up to 32 MB there), so malloc would keep their pages: with
  // 16-bit weights every matrix is panels and every layer is fused, about
  // half the model. Handing them back costs a walk of the heap per layer.
  if (copied) malloc_trim(0);
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
