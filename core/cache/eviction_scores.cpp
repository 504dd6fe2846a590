#include "core/cache/eviction_scores.h"

#include <limits>
#include <random>
#include <string>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

at::Tensor groupMeanWeights(const at::Tensor& weights, int64_t kv_heads) {
  require(weights.dim() == 3, "attention scores: expected weights [heads, n, T]");
  const int64_t heads = weights.size(0), n = weights.size(1), rows = weights.size(2);
  require(kv_heads > 0 && heads % kv_heads == 0, "attention scores: " + std::to_string(heads) +
                                                     " query heads do not split into " + std::to_string(kv_heads) +
                                                     " kv heads");
  const int64_t group = heads / kv_heads;
  // Query heads [g * group, (g + 1) * group) read kv head g.
  return weights.to(torch::kFloat32).reshape({kv_heads, group, n, rows}).mean(1);  // [kv, n, T]
}

at::Tensor h2oScores(const at::Tensor& weights, int64_t kv_heads) {
  return groupMeanWeights(weights, kv_heads).sum(1);  // [kv, T]
}

at::Tensor maxPoolSame(const at::Tensor& x, int64_t kernel) {
  require(kernel >= 1 && kernel % 2 == 1, "max pooling: the kernel must be odd and >= 1, got " + std::to_string(kernel));
  const int64_t half = kernel / 2, rows = x.size(-1);
  if (rows == 0) return x.clone();
  // Pad with -inf on both sides, then take the max over every window of `kernel` columns.
  auto padded = torch::constant_pad_nd(x, {half, half}, -std::numeric_limits<double>::infinity());  // [..., T + 2 half]
  return padded.unfold(-1, kernel, 1).amax(-1);  // [..., T]
}

at::Tensor snapkvScores(const at::Tensor& weights, int64_t kv_heads, int64_t window, int64_t kernel) {
  const auto grouped = groupMeanWeights(weights, kv_heads);  // [kv, n, T]
  const int64_t n = grouped.size(1), rows = grouped.size(2);
  require(window >= 1 && window <= n && window <= rows,
          "snapkv: the window must be in [1, " + std::to_string(std::min(n, rows)) + "], got " + std::to_string(window));
  auto summed = grouped.narrow(1, n - window, window).sum(1);  // [kv, T]
  const int64_t before = rows - window;
  if (before == 0) return summed;
  auto scores = summed.clone();  // [kv, T]
  scores.narrow(1, 0, before).copy_(maxPoolSame(summed.narrow(1, 0, before), kernel));  // pooled over [0, T - window)
  return scores;
}

at::Tensor tovaScores(const at::Tensor& weights, int64_t kv_heads) {
  return groupMeanWeights(weights, kv_heads).select(1, -1);  // [kv, T]: the last query's weights
}

at::Tensor knormScores(const at::Tensor& keys) {
  require(keys.dim() == 3, "knorm: expected keys [kv_heads, T, head_dim]");
  return keys.to(torch::kFloat32).norm(2, {-1}).neg();  // [kv, T]
}

at::Tensor randomScores(int64_t kv_heads, int64_t rows, uint64_t seed, int64_t layer) {
  // mt19937_64 is specified bit for bit; the top 24 bits make an exact float in [0, 1).
  std::mt19937_64 generator(seed * 1000003ULL + static_cast<uint64_t>(layer));
  auto scores = torch::empty({kv_heads, rows}, torch::kFloat32);  // [kv, T]
  auto* out = scores.data_ptr<float>();
  for (int64_t i = 0; i < kv_heads * rows; ++i) out[i] = static_cast<float>(generator() >> 40) / 16777216.0f;
  return scores;
}

at::Tensor recencyScores(int64_t kv_heads, int64_t rows) {
  return torch::arange(rows, torch::kFloat32).unsqueeze(0).expand({kv_heads, rows}).contiguous();  // [kv, T]
}

}  // namespace kvscope
