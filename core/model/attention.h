#pragma once
// Scaled dot-product attention over a KV cache, shared by every architecture.
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/cache/kv_cache.h"
#include "core/model/batch_rows.h"
#include "core/model/model_config.h"
#include "core/model/probe.h"

namespace kvscope {

// Appends this forward's k, v ([kv_heads, n, head_dim]) to the cache (when
// there is one) and returns the keys and values attention must see:
// [kv_heads, keys, head_dim] in the compute dtype.
std::pair<at::Tensor, at::Tensor> keysAndValues(const at::Tensor& k, const at::Tensor& v, int64_t layer,
                                                KvCache* cache);

// The factor a layer multiplies q.k by: 1 / sqrt(head_dim) by default,
// Gemma 2's query_pre_attn_scalar ** -0.5, GPT-2's scale_attn_weights and
// scale_attn_by_inverse_layer_idx. Models and inspectors share it so that
// an explanation shows the scale the forward really used.
double attentionScale(const ModelConfig& config, int64_t layer);

struct AttentionOptions {
  double scale = 1.0;            // multiplies q.k
  double softcap = 0;            // cap * tanh(score / cap) before the mask (Gemma 2); 0: none
  int64_t window = 0;            // sliding window: a query sees its last `window` keys, itself included; 0: all
  bool causal_among_new = true;  // false: the verify-mask-leak fault
  // [kv_heads, T] bool: the rows an eviction policy left to each kv head
  // (KvCache::keepMask); false rows get no weight. Undefined: every row.
  at::Tensor keep;
  // Rows [0, pad_rows) are a left-padded sequence's pad rows: hidden from
  // every query at key index >= pad_rows (the real ones). A pad query still
  // sees them, so it always has a key to attend to and its row stays finite.
  int64_t pad_rows = 0;
};

// The pad rows attention must hide for one sequence of a forward: the
// cache's pad rows (while it masks them) and the pads before this
// forward's inputs (a left-padded prefill writes them now). Pads after the
// inputs need no mask: they come after every real query, which the causal
// mask already keeps from them.
int64_t padRowsHidden(const SequenceForward& sequence);

// [n, T] bool: which keys each of n queries over T keys may see by the
// causal, window and pad rules of `options` (not its keep mask): what the
// AttentionMask probe records. Short forwards share one tensor while the
// shape and options repeat (every layer of a verify): read it, never write it.
at::Tensor visibleKeys(int64_t n, int64_t total, const AttentionOptions& options);

// q: [heads, n, head_dim]; keys, values: [kv_heads, T, head_dim] with heads a
// multiple of kv_heads (GQA/MQA: query head h reads kv head h / group).
// Query i sits at key index T - n + i and sees keys T - n + i - window < j <=
// T - n + i (by row index, as real engines build the mask). With
// causal_among_new false every query also sees all of the last n rows. Rows
// options.keep removes are hidden from every query of their kv head, and
// rows before options.pad_rows from every query past them; the
// AttentionMask probe records the [n, T] causal/window mask only (the keep
// mask is per kv head; the weights probe shows its effect as zeros).
// Returns [heads, n, head_dim]. Records AttentionWeights, AttentionOutput and
// AttentionMask.
at::Tensor causalAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const AttentionOptions& options, int64_t layer, ProbeSink* probes);

// A batched forward's attention (core/model/batch_rows.h): for each sequence,
// its rows of k and v go into its own cache (keysAndValues) and its rows of q
// attend over that cache with `layer_options` (scale, softcap, window) and
// what the cache says (fault switches, an eviction's keep mask), recording
// into the sequence's own probes. q [heads, N, head_dim], k and v
// [kv_heads, N, head_dim] (every sequence's rows) -> [heads, N, head_dim].
at::Tensor attendEachSequence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const BatchRows& batch,
                              int64_t layer, const AttentionOptions& layer_options);

}  // namespace kvscope
