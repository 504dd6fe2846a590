#include "core/model/few_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>

#include <ATen/Parallel.h>

namespace kvscope {
namespace {

// Below this many multiply-adds per thread a second thread costs more than
// it saves (an OpenMP fork/join is a few microseconds).
constexpr int64_t kMinWorkPerThread = 64 * 1024;

std::atomic<bool> kernel_enabled{true};

bool cpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return has;
}

bool cpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// Columns of the block at j0 that exist (the last block of a plain matrix
// whose width is not a multiple of 16 is partial).
int64_t columnsLeft(const FewRowsWeight& w, int64_t j0, int64_t vector) {
  return std::clamp<int64_t>(w.out - j0 - kPanelWidth * vector, 0, kPanelWidth);
}

// One register block: y[r, j0 .. j0 + 16 NB) for rows r = 0 .. M-1. The NB
// x M accumulators stay in registers while the loop walks the block's
// 16-column vectors of the weight down its `in` rows. The small loops are
// unrolled by pragma: rolled, GCC -O2 keeps the accumulator array in memory
// and stores all of it every iteration (3.5x slower).
template <int M, int NB>
__attribute__((target("avx512f,fma"))) void block512(const float* x, const FewRowsWeight& w, float* y, int64_t j0) {
  const float* vectors[NB];
  __mmask16 mask[NB];
  #pragma GCC unroll 16
  for (int b = 0; b < NB; ++b) {
    vectors[b] = w.data + (j0 / kPanelWidth + b) * w.vector_stride;
    const int64_t left = columnsLeft(w, j0, b);
    mask[b] = left == kPanelWidth ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  }
  __m512 acc[M][NB];
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  for (int64_t i = 0, offset = 0; i < w.in; ++i, offset += w.row_stride) {
    __m512 wv[NB];
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) wv[b] = _mm512_maskz_loadu_ps(mask[b], vectors[b] + offset);
    #pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const __m512 xr = _mm512_set1_ps(x[r * w.in + i]);
      #pragma GCC unroll 16
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(xr, wv[b], acc[r][b]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(y + r * w.out + j0 + kPanelWidth * b, mask[b], acc[r][b]);
}

// The AVX2 twin: each 16-column vector is two 8-wide halves.
template <int M, int NB>
__attribute__((target("avx2,fma"))) void block256(const float* x, const FewRowsWeight& w, float* y, int64_t j0) {
  constexpr int V = 2 * NB;  // 8-wide vectors per row
  const float* vectors[V];
  __m256i mask[V];
  #pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    vectors[v] = w.data + (j0 / kPanelWidth + v / 2) * w.vector_stride + 8 * (v % 2);
    const int64_t left = std::clamp<int64_t>(columnsLeft(w, j0, v / 2) - 8 * (v % 2), 0, 8);
    alignas(32) int32_t lanes[8];
    for (int k = 0; k < 8; ++k) lanes[k] = k < left ? -1 : 0;
    mask[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  }
  __m256 acc[M][V];
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0, offset = 0; i < w.in; ++i, offset += w.row_stride) {
    __m256 wv[V];
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v) wv[v] = _mm256_maskload_ps(vectors[v] + offset, mask[v]);
    #pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const __m256 xr = _mm256_set1_ps(x[r * w.in + i]);
      #pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(xr, wv[v], acc[r][v]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < M; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < V; ++v) _mm256_maskstore_ps(y + r * w.out + j0 + 8 * v, mask[v], acc[r][v]);
}

// 16-column vectors per block for M rows: as many as fit beside the M x NB
// accumulators and the NB weight vectors (AVX-512: 32 registers; AVX2: 16).
// More vectors per block means fewer broadcasts of x per multiply-add; the
// bundled target's matrices, 1 thread, hot in cache: 5 rows 626 -> 600 us
// per forward with 5 vectors instead of 3, 4 rows 565 -> 494 us with 6
// instead of 4 (medians of 200; a 5-row forward is then near the machine's
// multiply-add bound, one 512-bit FMA per cycle).
template <int M>
constexpr int kVectors512 = M <= 4 ? 6 : M == 5 ? 5 : M == 6 ? 4 : 3;
template <int M>
constexpr int kVectors256 = M == 1 ? 4 : M == 2 ? 3 : M == 3 ? 2 : 1;
constexpr int64_t kMaxRows512 = 8;
constexpr int64_t kMaxRows256 = 6;

// A block of `vectors` (1 .. NB) 16-column vectors at vector v: the widest
// register block, or the narrower one a range's remainder needs.
template <bool Avx512, int M, int NB>
void narrowBlock(const float* x, const FewRowsWeight& w, float* y, int64_t v, int64_t vectors) {
  if constexpr (NB > 1) {
    if (vectors < NB) return narrowBlock<Avx512, M, NB - 1>(x, w, y, v, vectors);
  }
  if constexpr (Avx512) {
    block512<M, NB>(x, w, y, v * kPanelWidth);
  } else {
    block256<M, NB>(x, w, y, v * kPanelWidth);
  }
}

// Vectors [first, last): full-width blocks, then one narrower block for the
// remainder (a full-width block there would multiply masked-off zeros).
template <bool Avx512, int M>
void vectorRange(const float* x, const FewRowsWeight& w, float* y, int64_t first, int64_t last) {
  constexpr int NB = Avx512 ? kVectors512<M> : kVectors256<M>;
  int64_t v = first;
  for (; v + NB <= last; v += NB) narrowBlock<Avx512, M, NB>(x, w, y, v, NB);
  if (v < last) narrowBlock<Avx512, M, NB>(x, w, y, v, last - v);
}

// All output columns for M rows, split over threads by 16-column vectors
// (not by register blocks), so the shares are equal however the width
// divides: split by blocks, a 256-column weight at 5 rows gave one thread
// 160 columns and the other 96, and at 3 rows 192 and 64.
template <int M>
void product(bool avx512, const float* x, const FewRowsWeight& w, float* y) {
  const int64_t vectors = (w.out + kPanelWidth - 1) / kPanelWidth;
  const int64_t grain = std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, M * w.in * kPanelWidth));
  at::parallel_for(0, vectors, grain, [&](int64_t first, int64_t last) {
    if (avx512) {
      vectorRange<true, M>(x, w, y, first, last);
    } else {
      vectorRange<false, M>(x, w, y, first, last);
    }
  });
}

// rows <= 8 for AVX-512, <= 6 for AVX2.
void productOfRows(bool avx512, const float* x, int64_t rows, const FewRowsWeight& w, float* y) {
  switch (rows) {
    case 1: product<1>(avx512, x, w, y); break;
    case 2: product<2>(avx512, x, w, y); break;
    case 3: product<3>(avx512, x, w, y); break;
    case 4: product<4>(avx512, x, w, y); break;
    case 5: product<5>(avx512, x, w, y); break;
    case 6: product<6>(avx512, x, w, y); break;
    case 7: product<7>(avx512, x, w, y); break;
    default: product<8>(avx512, x, w, y); break;
  }
}

}  // namespace

void setFewRowsKernelEnabled(bool enabled) { kernel_enabled = enabled; }

bool fewRowsSupported() { return kernel_enabled && (cpuHasAvx512() || cpuHasAvx2()); }

bool fewRowsProduct(const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  return fewRowsProduct(cpuHasAvx512() ? FewRowsIsa::Avx512 : FewRowsIsa::Avx2, x, rows, weight, y);
}

bool fewRowsProduct(FewRowsIsa isa, const float* x, int64_t rows, const FewRowsWeight& weight, float* y) {
  const bool avx512 = isa == FewRowsIsa::Avx512;
  if (!kernel_enabled || !(avx512 ? cpuHasAvx512() : cpuHasAvx2()) || rows < 1 || rows > kFewRowsMax) return false;
  // Passes of at most the rows whose accumulators fit the registers; each
  // pass reads the weight once.
  const int64_t per_pass = avx512 ? kMaxRows512 : kMaxRows256;
  for (int64_t r = 0; r < rows; r += per_pass) {
    productOfRows(avx512, x + r * weight.in, std::min(per_pass, rows - r), weight, y + r * weight.out);
  }
  return true;
}

}  // namespace kvscope
