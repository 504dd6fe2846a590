#pragma once
// The scorers behind the token-eviction policies (core/cache/eviction_policy.h):
// pure functions from tensors to one score per (kv head, row), higher = more
// worth keeping. Where a score comes from attention, it is averaged over the
// query heads that share the kv head (GQA: query head h reads kv head
// h / group), so every kv head gets one ranking for all of its readers.
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace kvscope {

// weights: [heads, n, T] softmax weights of n queries over T rows, heads a
// multiple of kv_heads. Returns [kv_heads, n, T]: the mean over each kv head's
// query heads.
at::Tensor groupMeanWeights(const at::Tensor& weights, int64_t kv_heads);

// H2O: the attention weight each row received, summed over all n queries.
// weights [heads, n, T] -> [kv_heads, T].
at::Tensor h2oScores(const at::Tensor& weights, int64_t kv_heads);

// SnapKV: the weight each row received from the last `window` queries,
// summed; then, over the rows before the window ([0, T - window)), max-pooled
// with `kernel` (odd; stride 1, same padding, as SnapKV's max_pool1d with
// padding kernel // 2). The window's own rows keep their summed weight (the
// policy keeps them whatever their score). weights [heads, n, T] -> [kv_heads, T].
// Requires 1 <= window <= min(n, T) and an odd kernel >= 1.
at::Tensor snapkvScores(const at::Tensor& weights, int64_t kv_heads, int64_t window, int64_t kernel);

// Max-pooling along the last axis, stride 1, same padding (pads count as
// -inf): out[..., j] = max(x[..., j - kernel/2 .. j + kernel/2]). kernel odd.
at::Tensor maxPoolSame(const at::Tensor& x, int64_t kernel);

// TOVA: the weight each row gets from the current (last) query.
// weights [heads, n, T] -> [kv_heads, T].
at::Tensor tovaScores(const at::Tensor& weights, int64_t kv_heads);

// Knorm: keys with a low L2 norm are kept, so the score is minus the norm.
// keys [kv_heads, T, head_dim] -> [kv_heads, T].
at::Tensor knormScores(const at::Tensor& keys);

// Random: uniform [0, 1) scores from a seeded generator; the same seed and
// layer always give the same scores. -> [kv_heads, T] float32.
at::Tensor randomScores(int64_t kv_heads, int64_t rows, uint64_t seed, int64_t layer);

// Recency: row r scores r (StreamingLLM keeps the most recent rows after its
// sinks). -> [kv_heads, T] float32.
at::Tensor recencyScores(int64_t kv_heads, int64_t rows);

}  // namespace kvscope
