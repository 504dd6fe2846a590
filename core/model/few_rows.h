#pragma once
// The product of a few rows with a dense weight: a decode step (1 row), a
// speculative verify pass (gamma + 1 rows, up to gamma 15) or a short re-feed;
// and a prefill over the panel weights kept in cache or kept in 16 bits.
// Weights are float32, or bfloat16 / float16 as the checkpoint stores them:
// each 16-column vector is widened to float32 in registers as it is loaded
// and every product is summed in float32 in the same order, so a 16-bit
// weight gives bit for bit what its float32 widening gives
// (core/model/weight_residency.h).
//
// Why not BLAS: with this machine's OpenBLAS 0.3.21, 2-8 rows go to a
// single-threaded "small matrix" kernel, so at 2 threads a 5-row product
// costs 2-3x a 1-row gemv, which is threaded, and a verify pass cost 2x a
// decode step. Decoding is bound by reading the weights; here each weight is
// read once for all rows, with the rows' outputs held in registers, and the
// output columns are split across threads. More rows than one register pass
// holds (8 with AVX-512, 6 with AVX2) take their passes over one block of the
// weight while it is in cache (256 inputs at a time), so up to 16 rows still
// read each weight from memory once.
//
// The weight is read 16 output columns at a time. In the panel layout
// (core/model/dense.h) each 16-column panel is one contiguous stream, which
// the hardware prefetcher follows; from a plain [in, out] matrix the same
// block is a strided walk, which it does not: there the block prefetches its
// vectors a few rows ahead itself (2.6x on a 5-row product from memory).
#include <cstdint>

namespace kvscope {

// Rows one call takes (in register passes of 8, or 6 with AVX2). dense()
// gives panel weights any number of rows, this many per call; column-major
// weights, read from memory, only up to 8 (see core/model/dense.cpp).
constexpr int64_t kFewRowsMax = 16;
// Output columns per panel and per vector step of the kernel.
constexpr int64_t kPanelWidth = 16;

// How a weight's elements are stored.
enum class FewRowsType { F32, BF16, F16 };

// Where element (i, j) of a weight [in, out] lives: at element
// data[(j / 16) * vector_stride + i * row_stride + j % 16] of `type`.
// 16-bit weights must have out a multiple of 16 (no partial vectors).
struct FewRowsWeight {
  const void* data = nullptr;
  FewRowsType type = FewRowsType::F32;
  int64_t in = 0;
  int64_t out = 0;
  int64_t row_stride = 0;     // elements from (i, j) to (i + 1, j)
  int64_t vector_stride = 0;  // elements from (i, j) to (i, j + 16)

  // A row-major [in, out] matrix (a column-major [out, in] weight's storage,
  // or GPT-2's Conv1D weight).
  static FewRowsWeight inOut(const void* data, FewRowsType type, int64_t in, int64_t out) {
    return {data, type, in, out, out, kPanelWidth};
  }
  static FewRowsWeight inOut(const float* data, int64_t in, int64_t out) {
    return inOut(data, FewRowsType::F32, in, out);
  }
  // Panels [out / 16, in, 16]; out must be a multiple of 16.
  static FewRowsWeight panels(const void* data, FewRowsType type, int64_t in, int64_t out) {
    return {data, type, in, out, kPanelWidth, kPanelWidth * in};
  }
  static FewRowsWeight panels(const float* data, int64_t in, int64_t out) {
    return panels(data, FewRowsType::F32, in, out);
  }
};

// Switches the kernel off and on again (benchmarks that measure what it
// gains). Off, fewRowsProduct returns false and dense() uses BLAS. On by
// default.
void setFewRowsKernelEnabled(bool enabled);

// Whether fewRowsProduct runs here: the CPU has AVX2 + FMA + F16C (or
// AVX-512F) and the kernel is switched on.
bool fewRowsSupported();
// Whether the CPU has what the kernel needs, switched on or not: the loader
// keeps 16-bit weights only where the kernel can widen them.
bool fewRowsCpuSupported();

// y [rows, out] (row-major, contiguous) = x [rows, in] (row-major,
// contiguous) * weight, for 1 <= rows <= kFewRowsMax. Returns false and
// writes nothing when it does not run here (or for a 16-bit weight whose out
// is not a multiple of 16). Threads: at::parallel_for over blocks of output
// columns.
bool fewRowsProduct(const float* x, int64_t rows, const FewRowsWeight& weight, float* y);

// The same with a chosen instruction set (the tests run both where the CPU
// has AVX-512); false when the CPU lacks it.
enum class FewRowsIsa { Avx2, Avx512 };
bool fewRowsProduct(FewRowsIsa isa, const float* x, int64_t rows, const FewRowsWeight& weight, float* y);

// Rows a many-row product hands the kernel at once: their slice of x for one
// 256-input step (512 KB) and their outputs for one block of columns (96 KB)
// stay in a core's L2 while every register pass reads the block.
constexpr int64_t kManyRowsChunk = 512;

// y [rows, out] = x [rows, in] * weight for any rows >= 1 (a prefill over a
// 16-bit weight), kManyRowsChunk rows per pass over the weight. Each output
// is summed in the same order as by fewRowsProduct, so the result is bit for
// bit that of fewRowsProduct over any split of the rows. Why not widened
// tiles for BLAS: OpenBLAS repacks x for every tile and the tiles are one
// more pass over the weight; the 0.5 B shape's 500-token forward took 1.8 s
// this way against 3.7 s (2 MiB tiles) and 2.8 s (BLAS over the float32
// weights), 2026-11-26, docs/performance-weights.md. Returns false when the
// kernel does not run here, as fewRowsProduct.
bool manyRowsProduct(const float* x, int64_t rows, const FewRowsWeight& weight, float* y);
bool manyRowsProduct(FewRowsIsa isa, const float* x, int64_t rows, const FewRowsWeight& weight, float* y);

// Vectors [first, first + count) of a weight (output columns 16 first ..
// 16 (first + count) - 1), widened to float32 as a row-major [in, 16 count]
// matrix in `out`: the tile a many-row product hands to BLAS. For any type;
// out must be a multiple of 16 for 16-bit weights. Threads: at::parallel_for
// over the inputs.
void widenVectors(const FewRowsWeight& weight, int64_t first, int64_t count, float* out);

}  // namespace kvscope
