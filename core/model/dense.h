#pragma once
// The dense layers of every model, and the layouts their weights are stored
// in for inference.
//
// BLAS is slow on the products a decoder makes most: 1 row (a decode step)
// and 2-16 rows (a speculative verify pass; see core/model/few_rows.h). For
// inference a dense weight [out, in] is stored in one of two layouts:
// - Panels [out / 16, in, 16], panel p holding output columns 16p .. 16p + 15
//   for every input, for weights up to 2 MiB (which stay in cache): the
//   few-row kernel reads each panel as one contiguous stream, 16 rows per
//   pass, for any number of rows (a prefill's passes find the panels in
//   cache; unpacking them for BLAS cost more up to 128 rows and the same at
//   256). Without the kernel (switched off, or training) they are unpacked
//   for BLAS.
// - Column-major [out, in] (its transpose contiguous) for larger weights,
//   other dtypes than float32, widths that are not a multiple of 16 and CPUs
//   without AVX2: one row goes to BLAS's gemv, 2-8 rows to the few-row
//   kernel's strided walk, more rows to BLAS's sgemm, which prefers this
//   layout to row-major. Why the size limit: a large weight is read from
//   memory, not cache, and there gemv streams it faster than the kernel's
//   several panels at once (0.5 B model, 2 threads: decode step 77 vs 88 ms
//   all in panels), and a prefill would copy all of it per forward (64-token
//   forward 374 vs 734 ms; 431 ms with only its 3.5 MB attention weights in
//   panels).
// Training keeps row-major [out, in] tensors with autograd: every function
// here accepts all three layouts.
//
// A weight may also be bfloat16 or float16, as its checkpoint stores it
// (core/model/weight_residency.h): then it is panels whenever out is a
// multiple of 16, whatever its size, because the few-row kernel, which widens
// it in registers, is the only reader that does not need a float32 copy. Any
// number of rows goes to the kernel (a prefill too: manyRowsProduct, faster
// here than BLAS over the float32 weight). The sums are the float32 path's:
// same kernel, same order, wherever the float32 weight goes to the kernel too
// (every weight up to kPanelMaxBytes, and up to 8 rows beyond). GPT-2's Conv1D
// weights stay [in, out], which the kernel reads directly; those up to
// kPanelMaxBytes go to it for any number of rows in float32 as well.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

// Weights over this size stay column-major for inference.
constexpr int64_t kPanelMaxBytes = 2 << 20;

// Whether packForInference stores a weight [out, in] of `dtype` as panels.
bool packsIntoPanels(int64_t out, int64_t in, c10::ScalarType dtype);

// bfloat16 or float16: a weight kept as its checkpoint stores it.
bool isSixteenBit(c10::ScalarType dtype);

// weight [out, in] -> the same values in the inference layout: panels
// [out / 16, in, 16] or column-major [out, in] (strides (1, out)).
at::Tensor packForInference(const at::Tensor& weight);

// Whether a weight is stored as panels (3-D).
bool isPanels(const at::Tensor& weight);
// Whether a weight is in an inference layout (panels, or column-major 2-D).
bool isInferenceLayout(const at::Tensor& weight);

// The logical shape [out, in] of a weight in any layout.
std::vector<int64_t> denseShape(const at::Tensor& weight);
// The weight as an [out, in] tensor: itself, or for panels a row-major copy.
at::Tensor denseMatrix(const at::Tensor& weight);
// Rows `ids` ([n] int64) of a weight [out, in] in any layout -> [n, in]: the
// embedding lookup (also of a head tied to the embedding), float32 when the
// weight is 16-bit.
at::Tensor denseRows(const at::Tensor& weight, const at::Tensor& ids);

// x [n, in], weight [out, in] in any layout, bias [out] or undefined -> [n, out].
at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// dense() into rows the caller owns: x [rows, in] float32 row-major ->
// y [rows, out] row-major, the same values dense() returns. Panel weights,
// and column-major float32 weights with 2-8 rows, go to the few-row kernel
// straight from x into y, as dense() sends them (no tensor made); every
// other case is dense() and a copy. The lean forward's products.
void denseInto(const float* x, int64_t rows, int64_t in, const at::Tensor& weight, const at::Tensor& bias, float* y);

// denseRows() into rows the caller owns: out [n, in] float32 = rows `ids` of
// a weight [out, in] in any layout and dtype (the embedding lookup).
void denseRowsInto(const at::Tensor& weight, const int64_t* ids, int64_t n, float* out);

// x [n, in], weight [in, out] (GPT-2's Conv1D), bias [out] -> [n, out].
at::Tensor denseInOut(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Kept for the loader's column-major path: weight [out, in] -> the same
// values with strides (1, out).
at::Tensor columnMajor(const at::Tensor& weight);

}  // namespace kvscope
