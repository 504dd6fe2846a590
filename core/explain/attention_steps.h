#pragma once
// Attention for one query, step by step, with the engine's own numbers: the
// hidden state entering the layer -> q, k, v (before and after the rotary
// embedding) -> q.k against every key the query can see -> scaled ->
// soft-capped (Gemma 2) -> masked -> softmax -> weights . V -> through o_proj
// (this head's share, and the layer's whole attention output). The tensors come
// from probe points of one uncached forward of the ids (core/model/probe.h),
// so an explanation cannot drift from what the model computes; the steps after
// q and k are recomputed from them and compared with the forward's own
// attention weights and output (`model_difference`).
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/causal_lm.h"

namespace kvscope {

// Which query: layer L, query head H, position P (a row of the prompt).
struct AttentionQuery {
  int64_t layer = 0;
  int64_t head = 0;
  int64_t position = 0;
};

// The rotary embedding at position P (Llama family; GPT-2 has none).
// Channel i of a head turns with channel i + head_dim / 2 (Hugging Face's
// rotate_half layout) by angle[i]: (x_i, x_j) -> m * (x_i cos a - x_j sin a,
// x_j cos a + x_i sin a) with j = i + head_dim / 2 and m = magnitude.
struct RotaryStep {
  at::Tensor angle;        // [head_dim / 2] radians: P * theta_i (with the model's scaling)
  at::Tensor theta;        // [head_dim / 2] radians per position of each pair
  double magnitude = 1.0;  // longrope's cos/sin scale; 1 otherwise
};

struct AttentionSteps {
  AttentionQuery query;
  int64_t kv_head = 0;                     // G = head / (heads / kv_heads): the K/V head this query reads
  std::vector<int64_t> query_heads_sharing;  // every query head that reads kv head G (GQA), head included
  int64_t window = 0;                      // the layer's sliding window (keys a query sees, itself included); 0: none

  at::Tensor hidden;             // [hidden] the hidden state entering layer L at P, after its norm
  at::Tensor q_before_rope;      // [head_dim] head H's query at P (after Qwen3's q_norm), before RoPE
  std::optional<RotaryStep> rotary;  // nullopt: the model has no rotary embedding (GPT-2)
  at::Tensor q;                  // [head_dim] after RoPE: what meets the keys
  at::Tensor keys_before_rope;   // [P + 1, head_dim] kv head G's key rows of positions 0..P, before RoPE
  at::Tensor keys;               // [P + 1, head_dim] the same after RoPE (what the cache holds)
  at::Tensor values;             // [P + 1, head_dim] kv head G's value rows of positions 0..P

  at::Tensor scores;   // [P + 1] q . k_j
  double scale = 1.0;  // the layer's factor (core/model/attention.h attentionScale)
  at::Tensor scaled;   // [P + 1] scores * scale
  double softcap = 0;  // Gemma 2: cap * tanh(scaled / cap) before the mask; 0: none
  at::Tensor capped;   // [P + 1] scaled after soft-capping (== scaled without a cap)
  at::Tensor visible;  // [P + 1] bool: the mask the forward applied (causal, sliding window)
  at::Tensor masked;   // [P + 1] capped, -inf where the key is hidden
  at::Tensor weights;  // [P + 1] softmax(masked): the attention weights
  at::Tensor output;   // [head_dim] weights . values, before o_proj

  // Through o_proj (GPT-2: c_proj): the layer's output projection reads every
  // head's output side by side, [heads * head_dim] -> [hidden], so it is the
  // sum over heads of each head's slice of the weight times its output, plus
  // the bias.
  at::Tensor o_proj_slice;       // [hidden, head_dim] the columns of o_proj's [out, in] weight that read head H
  at::Tensor head_contribution;  // [hidden] o_proj_slice . output: head H's share, bias not included
  at::Tensor o_proj_bias;        // [hidden] zeros when the layer has no bias (Llama); added once, not per head
  at::Tensor projected;          // [hidden] the layer's attention output after o_proj at P: all heads + bias,
                                 // as the forward computed it (Probe::AttentionProjected), before the residual

  // max |difference| of weights and output from the forward's own attention
  // weights and output (Probe::AttentionWeights, Probe::AttentionOutput).
  double model_difference = 0;
  // max |sum over heads of slice_h . output_h + bias - projected|, with head
  // H's output and contribution from these steps and the other heads' outputs
  // from the forward (Probe::AttentionOutput).
  double projection_difference = 0;
};

// Throws Error naming the bad field and its valid range (layer, head,
// position against `tokens`, the number of ids).
void checkAttentionQuery(const ModelConfig& config, int64_t tokens, const AttentionQuery& query);

// The query head's kv head and the query heads that share it.
int64_t kvHeadOf(const ModelConfig& config, int64_t head);
std::vector<int64_t> queryHeadsSharing(const ModelConfig& config, int64_t kv_head);

// Runs one uncached forward of `ids` (the whole prompt, as a prefill would)
// and explains query (layer, head, position). Runs under InferenceMode.
AttentionSteps attentionSteps(const CausalLM& model, const std::vector<int64_t>& ids, const AttentionQuery& query);

}  // namespace kvscope
