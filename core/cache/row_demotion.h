#pragma once
// Demotion instead of eviction (MiKV): a row a policy would drop stays in the
// cache as a low-precision copy. Symmetric round-to-nearest quantisation with
// one scale per (kv head, row): scale = max |x| / (2^(bits-1) - 1), so the
// largest entry maps to the top level and every error is at most scale / 2.
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace kvscope {

// x: [kv_heads, T, D]. Returns x quantised to `bits` (8 or 4) and back, in
// float32 ([kv_heads, T, D]); an all-zero row stays zero.
at::Tensor quantizeRows(const at::Tensor& x, int64_t bits);

// Bytes of `rows` demoted rows of D entries at `bits`, with a float32 scale each.
int64_t demotedRowBytes(int64_t rows, int64_t head_dim, int64_t bits);

}  // namespace kvscope
