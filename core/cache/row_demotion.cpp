#include "core/cache/row_demotion.h"

#include <string>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

at::Tensor quantizeRows(const at::Tensor& x, int64_t bits) {
  require(bits == 8 || bits == 4, "quantizeRows: bits must be 8 or 4, got " + std::to_string(bits));
  require(x.dim() == 3, "quantizeRows: expected [kv_heads, T, D]");
  const double levels = static_cast<double>((int64_t{1} << (bits - 1)) - 1);  // 127 or 7
  const auto values = x.to(torch::kFloat32);                                   // [kv, T, D]
  const auto scale = values.abs().amax(-1, /*keepdim=*/true) / levels;         // [kv, T, 1]
  const auto safe = torch::where(scale > 0, scale, torch::ones_like(scale));   // a zero row divides by 1
  return (values / safe).round().clamp(-levels, levels) * safe;                // [kv, T, D]
}

int64_t demotedRowBytes(int64_t rows, int64_t head_dim, int64_t bits) {
  return rows * ((head_dim * bits + 7) / 8 + 4);
}

}  // namespace kvscope
