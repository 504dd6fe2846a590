#include "core/model/few_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include "core/runtime/cpu_features.h"

// GCC 12 reports the intrinsics' own _mm512_undefined_epi32() (inside
// _mm512_cvtepu16_epi32 and _mm512_slli_epi32) as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvscope {
namespace {

// Below this many multiply-adds per thread a second thread costs more than
// it saves (an OpenMP fork/join is a few microseconds).
constexpr int64_t kMinWorkPerThread = 64 * 1024;

// Inputs per step when more rows than one register pass holds share a block
// of the weight: the block's slice (3 vectors x 256 inputs, 48 KB in float32)
// stays in cache while every pass reads it.
constexpr int64_t kInputsPerStep = 256;

std::atomic<bool> kernel_enabled{true};


// The element types of a weight, as distinct C++ types for the templates.
struct Bf16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};

// 16 elements at p widened to float32 (AVX-512). Masked lanes read as 0; a
// 16-bit weight has no partial vectors (its out is a multiple of 16), so the
// mask is always full there. bfloat16 is the top half of a float32: widened
// by a shift, exactly.
__attribute__((target("avx512f"), always_inline)) inline __m512 load512(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, p);
}
__attribute__((target("avx512f"), always_inline)) inline __m512 load512(const Bf16* p, __mmask16) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
__attribute__((target("avx512f"), always_inline)) inline __m512 load512(const Half* p, __mmask16) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// 8 elements at p widened to float32 (AVX2).
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load256(const float* p, __m256i mask) {
  return _mm256_maskload_ps(p, mask);
}
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load256(const Bf16* p, __m256i) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load256(const Half* p, __m256i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Columns of the block at j0 that exist (the last block of a plain matrix
// whose width is not a multiple of 16 is partial).
int64_t columnsLeft(const FewRowsWeight& w, int64_t j0, int64_t vector) {
  return std::clamp<int64_t>(w.out - j0 - kPanelWidth * vector, 0, kPanelWidth);
}

// A plain [in, out] weight of at least kPrefetchMinBytes is not in cache,
// and a register block reads it as runs of one vector a row apart (19 KB in
// the 0.5 B shape's float32 MLP), which the hardware prefetcher does not
// follow: the block asks for its vectors kPrefetchRows rows ahead. A 5-row
// product of 896 x 4864 from memory at 2 threads: 1.09 -> 0.40 ms (4 to 16
// rows ahead alike). A panel is one contiguous stream, prefetched already.
constexpr int64_t kPrefetchRows = 8;
constexpr int64_t kPrefetchMinBytes = 1 << 20;

// Elements ahead a block of w prefetches; 0: none.
int64_t prefetchDistance(const FewRowsWeight& w) {
  const bool in_out = w.vector_stride == kPanelWidth;
  const int64_t bytes = w.in * w.out * (w.type == FewRowsType::F32 ? 4 : 2);
  return in_out && bytes >= kPrefetchMinBytes ? kPrefetchRows * w.row_stride : 0;
}

// The vector `ahead` elements past p. The address is made as an integer: near
// the weight's last rows it lies past the end, which a prefetch may name (it
// never faults) but a pointer may not.
template <typename W>
__attribute__((always_inline)) inline void prefetchAhead(const W* p, int64_t ahead) {
  const auto address = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead) * sizeof(W);
  _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T0);
}

// What one register block works on: rows x [M, in] of the block's row
// group, their outputs y [M, out], inputs [k0, k1). `resume`: the outputs
// hold the sums over inputs [0, k0) (an earlier step), which continue in the
// same order, so the result does not depend on the steps.
struct Step {
  const float* x;
  float* y;
  int64_t k0, k1;
  bool resume;
};

// One register block: y[r, j0 .. j0 + 16 NB) for rows r = 0 .. M-1. The NB
// x M accumulators stay in registers while the loop walks the block's
// 16-column vectors of the weight down its inputs. The small loops are
// unrolled by pragma: rolled, GCC -O2 keeps the accumulator array in memory
// and stores all of it every iteration (3.5x slower).
// Prefetch: the weight is a plain [in, out] matrix out of cache
// (prefetchDistance > 0); a template parameter, so the panels' loop is
// exactly what it was without it.
template <typename W, int M, int NB, bool Prefetch>
__attribute__((target("avx512f,fma"))) void block512(const FewRowsWeight& w, const Step& s, int64_t j0) {
  const W* vectors[NB];
  __mmask16 mask[NB];
  #pragma GCC unroll 16
  for (int b = 0; b < NB; ++b) {
    vectors[b] = static_cast<const W*>(w.data) + (j0 / kPanelWidth + b) * w.vector_stride;
    const int64_t left = columnsLeft(w, j0, b);
    mask[b] = left == kPanelWidth ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  }
  __m512 acc[M][NB];
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b)
      acc[r][b] = s.resume ? _mm512_maskz_loadu_ps(mask[b], s.y + r * w.out + j0 + kPanelWidth * b) : _mm512_setzero_ps();
  [[maybe_unused]] const int64_t ahead = Prefetch ? prefetchDistance(w) : 0;
  for (int64_t i = s.k0, offset = s.k0 * w.row_stride; i < s.k1; ++i, offset += w.row_stride) {
    __m512 wv[NB];
    if constexpr (Prefetch) {
      #pragma GCC unroll 16
      for (int b = 0; b < NB; ++b) prefetchAhead(vectors[b] + offset, ahead);
    }
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) wv[b] = load512(vectors[b] + offset, mask[b]);
    #pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const __m512 xr = _mm512_set1_ps(s.x[r * w.in + i]);
      #pragma GCC unroll 16
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(xr, wv[b], acc[r][b]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(s.y + r * w.out + j0 + kPanelWidth * b, mask[b], acc[r][b]);
}

// The AVX2 twin: each 16-column vector is two 8-wide halves.
template <typename W, int M, int NB, bool Prefetch>
__attribute__((target("avx2,fma,f16c"))) void block256(const FewRowsWeight& w, const Step& s, int64_t j0) {
  constexpr int V = 2 * NB;  // 8-wide vectors per row
  const W* vectors[V];
  __m256i mask[V];
  #pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    vectors[v] = static_cast<const W*>(w.data) + (j0 / kPanelWidth + v / 2) * w.vector_stride + 8 * (v % 2);
    const int64_t left = std::clamp<int64_t>(columnsLeft(w, j0, v / 2) - 8 * (v % 2), 0, 8);
    alignas(32) int32_t lanes[8];
    for (int k = 0; k < 8; ++k) lanes[k] = k < left ? -1 : 0;
    mask[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  }
  __m256 acc[M][V];
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v)
      acc[r][v] = s.resume ? _mm256_maskload_ps(s.y + r * w.out + j0 + 8 * v, mask[v]) : _mm256_setzero_ps();
  [[maybe_unused]] const int64_t ahead = Prefetch ? prefetchDistance(w) : 0;
  for (int64_t i = s.k0, offset = s.k0 * w.row_stride; i < s.k1; ++i, offset += w.row_stride) {
    __m256 wv[V];
    if constexpr (Prefetch) {
      #pragma GCC unroll 16
      for (int v = 0; v < V; v += 2) prefetchAhead(vectors[v] + offset, ahead);  // one per 16-column vector
    }
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v) wv[v] = load256(vectors[v] + offset, mask[v]);
    #pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const __m256 xr = _mm256_set1_ps(s.x[r * w.in + i]);
      #pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(xr, wv[v], acc[r][v]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v) _mm256_maskstore_ps(s.y + r * w.out + j0 + 8 * v, mask[v], acc[r][v]);
}

// 16-column vectors per block for M rows: as many as fit beside the M x NB
// accumulators and the NB weight vectors (AVX-512: 32 registers; AVX2: 16).
// More vectors per block means fewer broadcasts of x per multiply-add; the
// bundled target's matrices, 1 thread, hot in cache: 5 rows 626 -> 600 us
// per forward with 5 vectors instead of 3, 4 rows 565 -> 494 us with 6
// instead of 4 (medians of 200). On 2026-11-29's machine the 4-row, 6-vector
// block alone runs at 90-96% of the multiply-add peak bench measures
// (core/bench/multiply_add_peak.h).
template <int M>
constexpr int kVectors512 = M <= 4 ? 6 : M == 5 ? 5 : M == 6 ? 4 : 3;
template <int M>
constexpr int kVectors256 = M == 1 ? 4 : M == 2 ? 3 : M == 3 ? 2 : 1;
constexpr int kMaxRows512 = 8;
constexpr int kMaxRows256 = 6;

// A block of `vectors` (1 .. NB) 16-column vectors at vector v: the widest
// register block, or the narrower one a range's remainder needs.
template <bool Avx512, typename W, int M, int NB>
void narrowBlock(const FewRowsWeight& w, const Step& s, int64_t v, int64_t vectors) {
  if constexpr (NB > 1) {
    if (vectors < NB) return narrowBlock<Avx512, W, M, NB - 1>(w, s, v, vectors);
  }
  const bool prefetch = prefetchDistance(w) > 0;
  if constexpr (Avx512) {
    prefetch ? block512<W, M, NB, true>(w, s, v * kPanelWidth) : block512<W, M, NB, false>(w, s, v * kPanelWidth);
  } else {
    prefetch ? block256<W, M, NB, true>(w, s, v * kPanelWidth) : block256<W, M, NB, false>(w, s, v * kPanelWidth);
  }
}

// The block at vector v, `vectors` wide (<= NB), for a group of `rows`
// (1 .. the register pass's maximum) rows.
template <bool Avx512, typename W, int NB>
void groupBlock(const FewRowsWeight& w, const Step& s, int rows, int64_t v, int64_t vectors) {
  switch (rows) {
    case 1: return narrowBlock<Avx512, W, 1, NB>(w, s, v, vectors);
    case 2: return narrowBlock<Avx512, W, 2, NB>(w, s, v, vectors);
    case 3: return narrowBlock<Avx512, W, 3, NB>(w, s, v, vectors);
    case 4: return narrowBlock<Avx512, W, 4, NB>(w, s, v, vectors);
    case 5: return narrowBlock<Avx512, W, 5, NB>(w, s, v, vectors);
    case 6: return narrowBlock<Avx512, W, 6, NB>(w, s, v, vectors);
  }
  if constexpr (Avx512) {
    if (rows == 7) return narrowBlock<Avx512, W, 7, NB>(w, s, v, vectors);
    return narrowBlock<Avx512, W, 8, NB>(w, s, v, vectors);
  }
}

// Vectors [first, last) for M rows that fit one register pass: full-width
// blocks, then one narrower block for the remainder (a full-width block
// there would multiply masked-off zeros). Each block reads its slice of the
// weight once, down all inputs.
template <bool Avx512, typename W, int M>
void onePass(const FewRowsWeight& w, const float* x, float* y, int64_t first, int64_t last) {
  constexpr int NB = Avx512 ? kVectors512<M> : kVectors256<M>;
  const Step s{x, y, 0, w.in, false};
  int64_t v = first;
  for (; v + NB <= last; v += NB) narrowBlock<Avx512, W, M, NB>(w, s, v, NB);
  if (v < last) narrowBlock<Avx512, W, M, NB>(w, s, v, last - v);
}

// Vectors [first, last) for more rows than one register pass holds: per
// block, kInputsPerStep inputs at a time, every group of rows takes its pass
// over that slice while it is in cache. So the weight is read from memory
// once, not once per group (a 16-row verify of a memory-bound model cost two
// single-pass reads before).
template <bool Avx512, typename W>
void groupedPasses(const FewRowsWeight& w, const float* x, int64_t rows, float* y, int64_t first, int64_t last) {
  constexpr int kGroup = Avx512 ? kMaxRows512 : kMaxRows256;
  constexpr int NB = Avx512 ? kVectors512<kGroup> : kVectors256<kGroup>;
  for (int64_t v = first; v < last; v += NB) {
    const int64_t vectors = std::min<int64_t>(NB, last - v);
    for (int64_t k0 = 0; k0 < w.in; k0 += kInputsPerStep) {
      const int64_t k1 = std::min(w.in, k0 + kInputsPerStep);
      for (int64_t r = 0; r < rows; r += kGroup) {
        const Step s{x + r * w.in, y + r * w.out, k0, k1, k0 > 0};
        groupBlock<Avx512, W, NB>(w, s, static_cast<int>(std::min<int64_t>(kGroup, rows - r)), v, vectors);
      }
    }
  }
}

template <bool Avx512, typename W>
void vectorRange(const FewRowsWeight& w, const float* x, int64_t rows, float* y, int64_t first, int64_t last) {
  constexpr int kGroup = Avx512 ? kMaxRows512 : kMaxRows256;
  if (rows > kGroup) return groupedPasses<Avx512, W>(w, x, rows, y, first, last);
  switch (rows) {
    case 1: return onePass<Avx512, W, 1>(w, x, y, first, last);
    case 2: return onePass<Avx512, W, 2>(w, x, y, first, last);
    case 3: return onePass<Avx512, W, 3>(w, x, y, first, last);
    case 4: return onePass<Avx512, W, 4>(w, x, y, first, last);
    case 5: return onePass<Avx512, W, 5>(w, x, y, first, last);
    case 6: return onePass<Avx512, W, 6>(w, x, y, first, last);
  }
  if constexpr (Avx512) {
    if (rows == 7) return onePass<Avx512, W, 7>(w, x, y, first, last);
    return onePass<Avx512, W, 8>(w, x, y, first, last);
  }
}

template <bool Avx512>
void typedRange(const FewRowsWeight& w, const float* x, int64_t rows, float* y, int64_t first, int64_t last) {
  switch (w.type) {
    case FewRowsType::F32: return vectorRange<Avx512, float>(w, x, rows, y, first, last);
    case FewRowsType::BF16: return vectorRange<Avx512, Bf16>(w, x, rows, y, first, last);
    case FewRowsType::F16: return vectorRange<Avx512, Half>(w, x, rows, y, first, last);
  }
}

// All output columns, split over threads by 16-column vectors (not by
// register blocks), so the shares are equal however the width divides:
// split by blocks, a 256-column weight at 5 rows gave one thread 160 columns
// and the other 96, and at 3 rows 192 and 64.
void product(bool avx512, const float* x, int64_t rows, const FewRowsWeight& w, float* y) {
  const int64_t vectors = (w.out + kPanelWidth - 1) / kPanelWidth;
  const int64_t grain = std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, rows * w.in * kPanelWidth));
  at::parallel_for(0, vectors, grain, [&](int64_t first, int64_t last) {
    if (avx512) {
      typedRange<true>(w, x, rows, y, first, last);
    } else {
      typedRange<false>(w, x, rows, y, first, last);
    }
  });
}

float widenScalar(float value) { return value; }
float widenScalar(Bf16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
float widenScalar(Half value) { return c10::detail::fp16_ieee_to_fp32_value(value.bits); }

// One input row of vectors [first, first + count) widened into out_row.
template <typename W>
__attribute__((target("avx512f"))) void widenRow512(const FewRowsWeight& w, int64_t i, int64_t first, int64_t count,
                                                    float* out_row) {
  for (int64_t c = 0; c < count; ++c) {
    const W* p = static_cast<const W*>(w.data) + (first + c) * w.vector_stride + i * w.row_stride;
    const int64_t left = columnsLeft(w, (first + c) * kPanelWidth, 0);
    const __mmask16 mask = left == kPanelWidth ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    _mm512_storeu_ps(out_row + c * kPanelWidth, load512(p, mask));
  }
}

template <typename W>
void widenRows(const FewRowsWeight& w, int64_t first, int64_t count, float* out) {
  const int64_t width = count * kPanelWidth;
  at::parallel_for(0, w.in, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = out + i * width;
      if (cpuHasAvx512()) {
        widenRow512<W>(w, i, first, count, row);
        continue;
      }
      for (int64_t c = 0; c < count; ++c) {
        const W* p = static_cast<const W*>(w.data) + (first + c) * w.vector_stride + i * w.row_stride;
        const int64_t left = columnsLeft(w, (first + c) * kPanelWidth, 0);
        for (int64_t k = 0; k < kPanelWidth; ++k) row[c * kPanelWidth + k] = k < left ? widenScalar(p[k]) : 0.0f;
      }
    }
  });
}

}  // namespace

void setFewRowsKernelEnabled(bool enabled) { kernel_enabled = enabled; }

bool fewRowsCpuSupported() { return cpuHasAvx512() || cpuHasAvx2FmaF16c(); }

bool fewRowsSupported() { return kernel_enabled && fewRowsCpuSupported(); }

bool fewRowsProduct(const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  return fewRowsProduct(cpuHasAvx512() ? FewRowsIsa::Avx512 : FewRowsIsa::Avx2, x, rows, weight, y);
}

namespace {

// Whether the kernel runs with `isa` on this weight here (rows aside).
bool kernelRuns(FewRowsIsa isa, const FewRowsWeight& weight) {
  const bool avx512 = isa == FewRowsIsa::Avx512;
  if (!kernel_enabled || !(avx512 ? cpuHasAvx512() : cpuHasAvx2FmaF16c())) return false;
  return weight.type == FewRowsType::F32 || weight.out % kPanelWidth == 0;
}

}  // namespace

bool fewRowsProduct(FewRowsIsa isa, const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  if (!kernelRuns(isa, weight) || rows < 1 || rows > kFewRowsMax) return false;
  product(isa == FewRowsIsa::Avx512, x, rows, weight, y);
  return true;
}

bool manyRowsProduct(const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  return manyRowsProduct(cpuHasAvx512() ? FewRowsIsa::Avx512 : FewRowsIsa::Avx2, x, rows, weight, y);
}

bool manyRowsProduct(FewRowsIsa isa, const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  if (!kernelRuns(isa, weight) || rows < 1) return false;
  for (int64_t r = 0; r < rows; r += kManyRowsChunk) {
    product(isa == FewRowsIsa::Avx512, x + r * weight.in, std::min(kManyRowsChunk, rows - r), weight, y + r * weight.out);
  }
  return true;
}

}  // namespace kvscope

namespace kvscope {

void widenVectors(const FewRowsWeight& weight, int64_t first, int64_t count, float* out) {
  switch (weight.type) {
    case FewRowsType::F32: return widenRows<float>(weight, first, count, out);
    case FewRowsType::BF16: return widenRows<Bf16>(weight, first, count, out);
    case FewRowsType::F16: return widenRows<Half>(weight, first, count, out);
  }
}

}  // namespace kvscope
