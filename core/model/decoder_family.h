#pragma once
// The decoder families built from Llama's blocks, and the checkpoint names of
// their per-layer weights, declared once per family (core/model/family_*.cpp).
// A family table lists each weight's role, name, shape and when it is present;
// loading, shape checks and namedParameters() all read the same table.
//
//   Llama / Qwen2 / Mistral  q_proj, k_proj, v_proj, o_proj (+ biases), gate/up/down_proj
//   Qwen3                    as Llama, plus per-head q_norm / k_norm before the rotary embedding
//   Gemma 2                  as Llama, plus pre/post norms around attention and the MLP
//   Phi-3                    fused qkv_proj [q | k | v] and gate_up_proj [gate | up]
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/model_config.h"

namespace kvscope {

// One decoder layer's weights by role; a family fills the roles it has.
struct DecoderLayerWeights {
  at::Tensor input_norm;            // [hidden]
  at::Tensor wq, bq, wk, bk, wv, bv;  // [heads|kv_heads * head_dim, hidden] (+ biases)
  at::Tensor w_qkv;                 // Phi-3: [(heads + 2 kv_heads) * head_dim, hidden]
  at::Tensor b_qkv;                 // fused for inference from bq | bk | bv (fuseProjections)
  at::Tensor wo, bo;                // [hidden, heads * head_dim]
  at::Tensor q_norm, k_norm;        // Qwen3: [head_dim]
  at::Tensor post_attention_norm;   // [hidden]: before the MLP (Llama) or after attention (Gemma 2)
  at::Tensor pre_ff_norm, post_ff_norm;  // Gemma 2: [hidden]
  at::Tensor w_gate, b_gate, w_up, b_up;  // [intermediate, hidden]
  at::Tensor w_gate_up;             // Phi-3: [2 * intermediate, hidden]
  at::Tensor b_gate_up;             // fused for inference from b_gate | b_up (fuseProjections)
  at::Tensor w_down, b_down;        // [hidden, intermediate]
};

struct LayerWeightSpec {
  const char* leaf;                                  // after "model.layers.N."
  at::Tensor DecoderLayerWeights::*slot;
  std::vector<int64_t> (*shape)(const ModelConfig&);
  bool (*present)(const ModelConfig&);               // null: always
};

const std::vector<LayerWeightSpec>& layerWeightSpecs(DecoderFamily family);

// The weights fuseProjections joins, each group in its fused row order:
// {wq, wk, wv} and {w_gate, w_up}.
using WeightSlot = at::Tensor DecoderLayerWeights::*;
const std::vector<std::vector<WeightSlot>>& fusedWeightGroups();

// For inference: q | k | v into w_qkv (+ b_qkv) and gate | up into w_gate_up
// (+ b_gate_up), when each part is stored as panels (core/model/dense.h).
// The parts become views of the fused matrix, so nothing is stored twice and
// every table slot still reads as its checkpoint tensor. Why: one product
// instead of three (or two) per layer, one thread split over all of their
// columns; with the bundled target's 64-column k and v, each product alone is
// too small to split. Each output column sums in the same order, so the
// values are bit-identical. Does nothing to layers already fused (Phi-3) or
// not in panels (large weights, training). Parts that already lie one after
// the other in one tensor (read straight into it by loadCausalLM) are adopted
// as they are: no copy.
void fuseProjections(DecoderLayerWeights& layer);

// The family tables (one file each).
const std::vector<LayerWeightSpec>& llamaLayerWeights();
const std::vector<LayerWeightSpec>& qwen3LayerWeights();
const std::vector<LayerWeightSpec>& gemma2LayerWeights();
const std::vector<LayerWeightSpec>& phi3LayerWeights();

// Shapes shared by the tables.
namespace shapes {
std::vector<int64_t> hidden(const ModelConfig& c);
std::vector<int64_t> headDim(const ModelConfig& c);
std::vector<int64_t> qProj(const ModelConfig& c);
std::vector<int64_t> kvProj(const ModelConfig& c);
std::vector<int64_t> qBias(const ModelConfig& c);
std::vector<int64_t> kvBias(const ModelConfig& c);
std::vector<int64_t> oProj(const ModelConfig& c);
std::vector<int64_t> upProj(const ModelConfig& c);
std::vector<int64_t> downProj(const ModelConfig& c);
std::vector<int64_t> intermediate(const ModelConfig& c);
}  // namespace shapes

}  // namespace kvscope
