#pragma once
// Query rows' attention over one kv head's keys and values with AVX-512: the
// inner loop of the lean forward's attention (core/model/cache_attention.h)
// on CPUs that have it, for head_dim a multiple of 16 up to 256.
//
// Why: the per-key loop that compilers make of a dot product, a scalar exp
// and an output update costs some 40 instructions per key, a 16-lane sum
// reduced once per key; a verify of 5 rows on the bundled target spent more
// time there than in its weight products (perf, 2026-11-28). Here 16 keys'
// dot products are reduced together (one transposing sum over their 16
// accumulators), the softmax's exp is libmvec's 16-lane expf, the output
// rows are summed in 4 independent chains, and every query of a kv head
// (its group's heads times the forward's rows) reads the cache a block of
// keys at a time, so the block is read from memory once for all of them.
//
// Every sum runs in an order fixed by the query's own key range [first,
// last]: a query's result depends only on its q, those keys and values, not
// on how many rows or heads share the call, so a verify row gives bit for
// bit what a decode step at its position gives.
#include <cstdint>

namespace kvscope {

struct QueryAttention {
  const float* q = nullptr;        // [head_dim]
  const float* k = nullptr;        // key row j at k + j * k_stride
  const float* v = nullptr;        // value row j at v + j * v_stride
  int64_t k_stride = 0, v_stride = 0;
  const bool* keep = nullptr;      // row j kept when keep[j * keep_stride]; null: every row
  int64_t keep_stride = 0;
  int64_t first = 0, last = 0;     // the keys the query sees, before the keep mask
  int64_t head_dim = 0;
  float scale = 1, softcap = 0;
  float* scores = nullptr;         // [last + 1] scratch, the query's own
  float* out = nullptr;            // [head_dim]
  // When set, the softmax weights the output was summed with, over all
  // weights_length keys: 0 for a key the query does not see, NaN everywhere
  // when it sees none (what causalAttention records as AttentionWeights).
  float* weights = nullptr;        // [weights_length]
  int64_t weights_length = 0;
};

// Whether attendQueryAvx512 runs here for this head_dim: the CPU has
// AVX-512F and head_dim is a multiple of 16 up to 256.
bool queryAttentionAvx512Applies(int64_t head_dim);

// For each query: out = softmax(scale * q . k_j for kept j in [first,
// last]) . v. The queries share k, v, their strides, keep, head_dim, scale
// and soft-cap, and each has its own scores row. When a query keeps no key
// its output is NaN, as the softmax of nothing but -inf is.
void attendQueriesAvx512(const QueryAttention* queries, int64_t count);

}  // namespace kvscope
