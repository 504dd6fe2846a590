#include "core/model/query_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/model/vector_exp.h"
#include "core/runtime/cpu_features.h"

// GCC 12 reports the intrinsics' own _mm512_undefined_ps() (inside the
// reductions and _mm512_mask_loadu_ps's helpers) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvscope {
namespace {

constexpr int kLanes = 16;
constexpr float kHidden = -std::numeric_limits<float>::infinity();

__attribute__((target("avx512f"), always_inline)) inline __mmask16 firstLanes(int64_t count) {
  return count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

// Lane l of the result is the sum of acc[l]'s 16 lanes, for l = 0 .. 15:
// pairs within each 128-bit lane, then quads, then across the 128-bit lanes,
// always in this order.
__attribute__((target("avx512f"), always_inline)) inline __m512 transposedSum(const __m512 (&acc)[kLanes]) {
  __m512 pairs[8];  // 128-bit lane L of pairs[p]: [a0+a2, b0+b2, a1+a3, b1+b3] of acc[2p], acc[2p+1]
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    pairs[p] = _mm512_add_ps(_mm512_unpacklo_ps(acc[2 * p], acc[2 * p + 1]),
                             _mm512_unpackhi_ps(acc[2 * p], acc[2 * p + 1]));
  }
  __m512 quads[4];  // 128-bit lane L of quads[p]: the lane-L sums of acc[4p .. 4p + 3]
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    quads[p] = _mm512_add_ps(_mm512_shuffle_ps(pairs[2 * p], pairs[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(pairs[2 * p], pairs[2 * p + 1], 0xEE));
  }
  // Halves: [quad a (L0+L1), quad a (L2+L3), quad b (L0+L1), quad b (L2+L3)].
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x88),
                                  _mm512_shuffle_f32x4(quads[0], quads[1], 0xDD));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x88),
                                  _mm512_shuffle_f32x4(quads[2], quads[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
}

// scores[j0 .. j0 + count) = scale * q . k_j, count <= 16. Each key's dot
// product is summed the same way whatever count is (absent keys add nothing
// to the others' lanes).
template <int C>
__attribute__((target("avx512f,fma"))) void scoreKeys(const QueryAttention& a, const __m512 (&q)[C], int64_t j0,
                                                     int64_t count) {
  __m512 acc[kLanes];
#pragma GCC unroll 16
  for (int l = 0; l < kLanes; ++l) {
    acc[l] = _mm512_setzero_ps();
    if (l >= count) continue;
    const float* k = a.k + (j0 + l) * a.k_stride;
    acc[l] = _mm512_mul_ps(q[0], _mm512_loadu_ps(k));
#pragma GCC unroll 16
    for (int c = 1; c < C; ++c) acc[l] = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k + kLanes * c), acc[l]);
  }
  const __m512 scores = _mm512_mul_ps(transposedSum(acc), _mm512_set1_ps(a.scale));
  _mm512_mask_storeu_ps(a.scores + j0, firstLanes(count), scores);
}

// The keep mask and the soft-cap over the scores, as causalAttention applies them.
void maskAndCap(const QueryAttention& a) {
  for (int64_t j = a.first; j <= a.last; ++j) {
    if (a.keep != nullptr && !a.keep[j * a.keep_stride]) {
      a.scores[j] = kHidden;
    } else if (a.softcap > 0) {
      a.scores[j] = std::tanh(a.scores[j] / a.softcap) * a.softcap;
    }
  }
}

__attribute__((target("avx512f"))) float largestScore(const QueryAttention& a) {
  __m512 largest = _mm512_set1_ps(kHidden);
  for (int64_t j = a.first; j <= a.last; j += kLanes) {
    const __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(kHidden), firstLanes(a.last + 1 - j), a.scores + j);
    largest = _mm512_max_ps(largest, s);
  }
  return _mm512_reduce_max_ps(largest);
}

// scores[j] = exp(scores[j] - largest); returns their sum (16 lane sums, then
// the lanes').
__attribute__((target("avx512f"))) float exponentiate(const QueryAttention& a, float largest) {
  const __m512 shift = _mm512_set1_ps(largest);
  __m512 total = _mm512_setzero_ps();
  for (int64_t j = a.first; j <= a.last; j += kLanes) {
    const __mmask16 lanes = firstLanes(a.last + 1 - j);
    const __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(kHidden), lanes, a.scores + j);
    const __m512 w = _mm512_maskz_mov_ps(lanes, exp16(_mm512_sub_ps(s, shift)));
    _mm512_mask_storeu_ps(a.scores + j, lanes, w);
    total = _mm512_add_ps(total, w);
  }
  return _mm512_reduce_add_ps(total);
}

// Keys per block: every query of a forward's kv head reads the block's keys
// (then values) while they are in L1 (64 rows of 128 floats: 32 KB), not
// each query the whole cache from L2. One query at a time, a 5-row verify
// of the bundled target at 507 cached rows spent 4.6 ns per (query, key),
// bound by L2 bandwidth (perf, 2026-11-28).
constexpr int64_t kBlock = 64;

// scores[j] for keys [lo, hi] of one query, 16 at a time. A key's score does
// not depend on which 16 it is summed with (transposedSum treats every lane
// alike), so the blocks may cut the keys anywhere.
template <int C>
__attribute__((target("avx512f,fma"))) void scoreRange(const QueryAttention& a, int64_t lo, int64_t hi) {
  __m512 q[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) q[c] = _mm512_loadu_ps(a.q + kLanes * c);
  for (int64_t j = lo; j <= hi; j += kLanes) scoreKeys<C>(a, q, j, std::min<int64_t>(kLanes, hi + 1 - j));
}

// The output's running sums of one query: with up to 4 vectors per row, 4
// sets, key j into set (j - first) % 4 (4 independent chains of multiply-adds instead
// of one), added at the end as (0 + 1) + (2 + 3); with more, one set. Each
// set sums its keys in increasing order, whatever the blocks, so the result
// depends only on the query's own keys.
template <int C>
struct ValueSums {
  static constexpr int kSets = C <= 4 ? 4 : 1;
  alignas(64) float sums[kSets][C * kLanes];
};

// One key's share of set `set`: set += scores[j] * inverse * v_j.
template <int C>
__attribute__((target("avx512f,fma"), always_inline)) inline void addValue(const QueryAttention& a, float inverse,
                                                                           int64_t j, __m512 (&set)[C]) {
  const __m512 w = _mm512_set1_ps(a.scores[j] * inverse);  // 0 for a removed row: 0 * v, as the tensor path adds it
  const float* v = a.v + j * a.v_stride;
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) set[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + kLanes * c), set[c]);
}

// Keys [lo, hi] of one query into its running sums.
template <int C>
__attribute__((target("avx512f,fma"))) void weighRange(const QueryAttention& a, float inverse, int64_t lo, int64_t hi,
                                                      ValueSums<C>& out) {
  constexpr int kSets = ValueSums<C>::kSets;
  __m512 acc[kSets][C];
#pragma GCC unroll 4
  for (int u = 0; u < kSets; ++u)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[u][c] = _mm512_load_ps(out.sums[u] + kLanes * c);
  int64_t j = lo;
  if constexpr (kSets == 4) {
    for (; j <= hi && (j - a.first) % 4 != 0; ++j) {  // up to the next set 0: its own set each
      const int64_t set = (j - a.first) % 4;
      if (set == 1) addValue<C>(a, inverse, j, acc[1]);
      if (set == 2) addValue<C>(a, inverse, j, acc[2]);
      if (set == 3) addValue<C>(a, inverse, j, acc[3]);
    }
  }
  for (; j + kSets - 1 <= hi; j += kSets) {
#pragma GCC unroll 4
    for (int u = 0; u < kSets; ++u) addValue<C>(a, inverse, j + u, acc[u]);
  }
#pragma GCC unroll 4
  for (int u = 0; u < kSets; ++u) {
    if (j + u <= hi) addValue<C>(a, inverse, j + u, acc[u]);
  }
#pragma GCC unroll 4
  for (int u = 0; u < kSets; ++u)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) _mm512_store_ps(out.sums[u] + kLanes * c, acc[u][c]);
}

template <int C>
__attribute__((target("avx512f,fma"))) void finishValues(const QueryAttention& a, const ValueSums<C>& in) {
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    __m512 sum = _mm512_load_ps(in.sums[0] + kLanes * c);
    if constexpr (ValueSums<C>::kSets == 4) {
      sum = _mm512_add_ps(_mm512_add_ps(sum, _mm512_load_ps(in.sums[1] + kLanes * c)),
                          _mm512_add_ps(_mm512_load_ps(in.sums[2] + kLanes * c), _mm512_load_ps(in.sums[3] + kLanes * c)));
    }
    _mm512_storeu_ps(a.out + kLanes * c, sum);
  }
}

// The block [b0, b0 + kBlock) cut to one query's keys: false when they miss it.
bool blockOfQuery(const QueryAttention& a, int64_t b0, int64_t* lo, int64_t* hi) {
  *lo = std::max(b0, a.first);
  *hi = std::min(b0 + kBlock - 1, a.last);
  return *lo <= *hi;
}

// Softmax over each query's scores: exp(s - largest) in place; the
// reciprocal of the sum, or NaN when the query sees no key.
float normalize(const QueryAttention& a) {
  if (a.keep != nullptr || a.softcap > 0) maskAndCap(a);
  const float largest = largestScore(a);
  if (largest == kHidden) return std::numeric_limits<float>::quiet_NaN();
  return 1.0f / exponentiate(a, largest);  // softmax multiplies by the reciprocal of the sum
}

// The weights a query's output is summed with (scores[j] * inverse, the
// factor addValue applies), written out over all its keys.
void writeWeights(const QueryAttention& a, float inverse) {
  if (std::isnan(inverse)) {
    std::fill(a.weights, a.weights + a.weights_length, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  std::fill(a.weights, a.weights + a.first, 0.0f);
  for (int64_t j = a.first; j <= a.last; ++j) a.weights[j] = a.scores[j] * inverse;
  std::fill(a.weights + a.last + 1, a.weights + a.weights_length, 0.0f);
}

template <int C>
void attendQueries(const QueryAttention* queries, int64_t count) {
  int64_t first = queries[0].first, last = queries[0].last;
  for (int64_t i = 1; i < count; ++i) {
    first = std::min(first, queries[i].first);
    last = std::max(last, queries[i].last);
  }
  const int64_t start = first - first % kBlock;
  for (int64_t b0 = start; b0 <= last; b0 += kBlock) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t lo, hi;
      if (blockOfQuery(queries[i], b0, &lo, &hi)) scoreRange<C>(queries[i], lo, hi);
    }
  }
  thread_local std::vector<ValueSums<C>> sums;
  thread_local std::vector<float> inverses;
  sums.assign(static_cast<size_t>(count), ValueSums<C>{});
  inverses.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    inverses[i] = normalize(queries[i]);
    if (queries[i].weights != nullptr) writeWeights(queries[i], inverses[i]);
  }
  for (int64_t b0 = start; b0 <= last; b0 += kBlock) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t lo, hi;
      if (!std::isnan(inverses[i]) && blockOfQuery(queries[i], b0, &lo, &hi)) {
        weighRange<C>(queries[i], inverses[i], lo, hi, sums[i]);
      }
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const QueryAttention& a = queries[i];
    if (std::isnan(inverses[i])) {
      std::fill(a.out, a.out + a.head_dim, std::numeric_limits<float>::quiet_NaN());
    } else {
      finishValues<C>(a, sums[i]);
    }
  }
}

}  // namespace

bool queryAttentionAvx512Applies(int64_t head_dim) {
  return cpuHasAvx512() && head_dim % kLanes == 0 && head_dim >= kLanes && head_dim <= 16 * kLanes;
}

void attendQueriesAvx512(const QueryAttention* queries, int64_t count) {
  if (count <= 0) return;
  switch (queries[0].head_dim / kLanes) {
    case 1: return attendQueries<1>(queries, count);
    case 2: return attendQueries<2>(queries, count);
    case 3: return attendQueries<3>(queries, count);
    case 4: return attendQueries<4>(queries, count);
    case 5: return attendQueries<5>(queries, count);
    case 6: return attendQueries<6>(queries, count);
    case 7: return attendQueries<7>(queries, count);
    case 8: return attendQueries<8>(queries, count);
    case 9: return attendQueries<9>(queries, count);
    case 10: return attendQueries<10>(queries, count);
    case 11: return attendQueries<11>(queries, count);
    case 12: return attendQueries<12>(queries, count);
    case 13: return attendQueries<13>(queries, count);
    case 14: return attendQueries<14>(queries, count);
    case 15: return attendQueries<15>(queries, count);
    case 16: return attendQueries<16>(queries, count);
  }
}

}  // namespace kvscope
