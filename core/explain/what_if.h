#pragma once
// "What if these cache entries were gone?" For one query (layer L, head H,
// position P): fill a cache with positions 0..P-1, edit layer L's rows (remove
// some, or zero channels of K or V), feed the token at P over the edited
// cache, and compare with the same forward over the untouched cache: the
// head's attention weights and output, and the model's next-token
// distribution (KL, top-1). The cache is really modified, so every layer
// after L sees the change as it would under an eviction or pruning policy.
//
// Also the element scores that rank what such an edit costs, for the
// current query: a K element by |k| x |q|, a V element by |v| x its row's
// attention weight.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/explain/attention_steps.h"
#include "core/model/causal_lm.h"

namespace kvscope {

// An edit of layer L's cache before the query at P reads it. Only earlier
// rows (positions 0..P-1) can be edited: row P is written by the query's own
// forward.
struct CacheEdit {
  std::vector<int64_t> remove_positions;     // rows removed from layer L (every kv head)
  std::vector<int64_t> zero_key_channels;    // channels of K set to 0, in kv head G (the query's)
  std::vector<int64_t> zero_value_channels;  // channels of V set to 0, in kv head G
  std::vector<int64_t> zero_positions;       // rows the zeroing applies to; empty: every row 0..P-1

  bool empty() const { return remove_positions.empty() && zero_key_channels.empty() && zero_value_channels.empty(); }
};

struct WhatIf {
  AttentionQuery query;
  int64_t kv_head = 0;
  at::Tensor removed;         // [P + 1] bool: rows the edit removed
  at::Tensor weights_before;  // [P + 1] head H's attention weights over positions 0..P, cache untouched
  at::Tensor weights_after;   // [P + 1] with the edit (0 at removed rows)
  at::Tensor output_before;   // [head_dim] head H's attention output, before o_proj
  at::Tensor output_after;    // [head_dim]
  at::Tensor logits_before;   // [vocab] the model's logits at P (the next token's)
  at::Tensor logits_after;    // [vocab]
  at::Tensor probabilities_before;  // [vocab] softmax(logits_before)
  at::Tensor probabilities_after;   // [vocab]
  double kl = 0;                    // KL(p_before || p_after), nats
  int64_t top1_before = 0;
  int64_t top1_after = 0;
  double max_logit_difference = 0;  // max |logits_after - logits_before|
};

// Checks that an edit fits the query: positions in 0..P-1, channels in
// 0..head_dim-1. Throws Error naming the bad entry and the valid range.
void checkCacheEdit(const ModelConfig& config, const AttentionQuery& query, const CacheEdit& edit);

// Runs the two single-token forwards described above (under InferenceMode).
// Throws Error for a bad query or edit, and for a longrope model whose
// rotary factor set for position P differs between the prompt's prefill and
// a cached decode (the numbers would not match the explanation).
WhatIf whatIf(const CausalLM& model, const std::vector<int64_t>& ids, const AttentionQuery& query,
              const CacheEdit& edit);

struct ElementScores {
  at::Tensor keys;    // [P + 1, head_dim] |k_jc| * |q_c|
  at::Tensor values;  // [P + 1, head_dim] |v_jc| * weight_j
};

ElementScores elementScores(const AttentionSteps& steps);

}  // namespace kvscope
