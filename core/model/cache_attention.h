#pragma once
// Attention of a few query rows over one sequence's keys and values, written
// straight into the caller's output rows: the lean forward's counterpart of
// causalAttention (core/model/attention.h), with the same mask (causal by row
// index, sliding window, the verify-mask-leak fault, an eviction's keep mask),
// scale, soft-cap and float32 softmax, but no tensor temporaries: the scores
// of a query live in a scratch row, the grouped-query product reads each
// kv head's keys in place (no copy per query head) and each head's output is
// written into its columns of the merged [n, heads * head_dim] rows o_proj
// reads. It records no probe itself; it writes the softmax weights it used
// where the caller asks (CacheAttentionRows::weights), so that a forward
// recording attention need not take the tensor path.
//
// The sums are float32 in another order than BLAS's batched product and
// ATen's softmax, so results agree with causalAttention to float32 rounding,
// not bit for bit (LeanForward tests bound the logits).
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/attention.h"

namespace kvscope {

struct CacheAttentionRows {
  const float* q = nullptr;  // row i, head h at q[i * q_stride + h * head_dim]
  int64_t q_stride = 0;
  float* out = nullptr;      // row i, head h at out[i * out_stride + h * head_dim]
  int64_t out_stride = 0;
  int64_t rows = 0;          // n: the queries sit at key indices T - n .. T - 1
  int64_t heads = 0;
  int64_t head_dim = 0;
  // When set, [heads, n, T]: each query's softmax weights, 0 for the keys it
  // does not see (NaN throughout when it sees none), as causalAttention
  // records them under Probe::AttentionWeights.
  float* weights = nullptr;
};

// One sequence's keys and values of one layer, float32, read in place: row
// j of kv head h at k + h * k_head_stride + j * k_row_stride (values likewise).
struct CacheRowsView {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t k_head_stride = 0, k_row_stride = 0;
  int64_t v_head_stride = 0, v_row_stride = 0;
  int64_t kv_heads = 0;
  int64_t total = 0;            // T
  const bool* keep = nullptr;   // keep[h * keep_head_stride + j * keep_row_stride]; null: every row kept
  int64_t keep_head_stride = 0, keep_row_stride = 0;
};

// attendCacheInto over rows read in place (options.keep is ignored: the
// view's keep is used). The lean forward calls it with a cache's own storage
// (KvCache::appendPlain), so no tensor is made per layer.
void attendCacheRowsInto(const CacheAttentionRows& rows, const CacheRowsView& cache, const AttentionOptions& options,
                         std::vector<float>& scratch);

// keys, values: [kv_heads, T, head_dim] (any dtype; float32 with unit inner
// stride is read in place), heads a multiple of kv_heads. options as
// causalAttention takes them (keep: [kv_heads, T] bool or undefined).
// `scratch` is grown as needed and reused across calls.
void attendCacheInto(const CacheAttentionRows& rows, const at::Tensor& keys, const at::Tensor& values,
                     const AttentionOptions& options, std::vector<float>& scratch);

}  // namespace kvscope
