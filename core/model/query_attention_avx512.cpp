#include "core/model/query_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/model/vector_exp.h"

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

// out = sum over j of scores[j] * inverse * v_j. With up to 4 vectors per
// row, keys first + 4m + u go to register set u (4 independent chains of
// multiply-adds instead of one), added at the end as (0 + 1) + (2 + 3).
// One key's share of the output: set += scores[j] * inverse * v_j.
template <int C>
__attribute__((target("avx512f,fma"), always_inline)) inline void addValue(const QueryAttention& a, float inverse,
                                                                           int64_t j, __m512 (&set)[C]) {
  const __m512 w = _mm512_set1_ps(a.scores[j] * inverse);  // 0 for a removed row: 0 * v, as the tensor path adds it
  const float* v = a.v + j * a.v_stride;
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) set[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + kLanes * c), set[c]);
}

// out = sum over j of scores[j] * inverse * v_j. With up to 4 vectors per
// row, keys first + 4m + u go to register set u (4 independent chains of
// multiply-adds instead of one), added at the end as (0 + 1) + (2 + 3).
template <int C>
__attribute__((target("avx512f,fma"))) void weighValues(const QueryAttention& a, float inverse) {
  constexpr int kSets = C <= 4 ? 4 : 1;
  __m512 acc[kSets][C];
#pragma GCC unroll 4
  for (int u = 0; u < kSets; ++u)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[u][c] = _mm512_setzero_ps();
  int64_t j = a.first;
  for (; j + kSets - 1 <= a.last; j += kSets) {
#pragma GCC unroll 4
    for (int u = 0; u < kSets; ++u) addValue<C>(a, inverse, j + u, acc[u]);
  }
#pragma GCC unroll 4
  for (int u = 0; u < kSets; ++u) {
    if (j + u <= a.last) addValue<C>(a, inverse, j + u, acc[u]);
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    __m512 sum = acc[0][c];
    if constexpr (kSets == 4) {
      sum = _mm512_add_ps(_mm512_add_ps(acc[0][c], acc[1][c]), _mm512_add_ps(acc[2][c], acc[3][c]));
    }
    _mm512_storeu_ps(a.out + kLanes * c, sum);
  }
}

template <int C>
__attribute__((target("avx512f,fma"))) void attendQuery(const QueryAttention& a) {
  __m512 q[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) q[c] = _mm512_loadu_ps(a.q + kLanes * c);
  for (int64_t j = a.first; j <= a.last; j += kLanes) scoreKeys<C>(a, q, j, std::min<int64_t>(kLanes, a.last + 1 - j));
  if (a.keep != nullptr || a.softcap > 0) maskAndCap(a);
  const float largest = largestScore(a);
  if (largest == kHidden) {
    for (int64_t d = 0; d < a.head_dim; ++d) a.out[d] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float total = exponentiate(a, largest);
  weighValues<C>(a, 1.0f / total);  // softmax multiplies by the reciprocal of the sum
}

bool cpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

bool queryAttentionAvx512Applies(int64_t head_dim) {
  return cpuHasAvx512() && head_dim % kLanes == 0 && head_dim >= kLanes && head_dim <= 16 * kLanes;
}

void attendQueryAvx512(const QueryAttention& a) {
  switch (a.head_dim / kLanes) {
    case 1: return attendQuery<1>(a);
    case 2: return attendQuery<2>(a);
    case 3: return attendQuery<3>(a);
    case 4: return attendQuery<4>(a);
    case 5: return attendQuery<5>(a);
    case 6: return attendQuery<6>(a);
    case 7: return attendQuery<7>(a);
    case 8: return attendQuery<8>(a);
    case 9: return attendQuery<9>(a);
    case 10: return attendQuery<10>(a);
    case 11: return attendQuery<11>(a);
    case 12: return attendQuery<12>(a);
    case 13: return attendQuery<13>(a);
    case 14: return attendQuery<14>(a);
    case 15: return attendQuery<15>(a);
    case 16: return attendQuery<16>(a);
  }
}

}  // namespace kvscope
