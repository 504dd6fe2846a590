#pragma once
// The dense layers of every model, and the layouts their weights are stored
// in for inference.
//
// Decoding is bound by reading the weights, and BLAS is slow on the products
// a decoder makes most: 1 row (a decode step) and 2-16 rows (a speculative
// verify pass; see core/model/few_rows.h for the measurements). So for
// inference a dense weight [out, in] is stored as panels: [out / 16, in, 16],
// panel p holding output columns 16p .. 16p + 15 for every input, so that
// the few-row kernel reads each panel as one contiguous stream. Products of
// more rows (a prefill) go to BLAS, 256 columns at a time unpacked from the
// panels (a copy of 1/m of the product's work for m rows).
//
// Weights whose `out` is not a multiple of 16, in another dtype than
// float32, or on a CPU without AVX2 are stored column-major instead (their
// transpose contiguous), which BLAS's few-row products prefer over
// row-major. Training keeps row-major [out, in] tensors with autograd: every
// function here accepts all three layouts.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

// Whether packForInference stores a weight with `out` rows in `dtype` as panels.
bool packsIntoPanels(int64_t out, c10::ScalarType dtype);

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
// embedding lookup of a head tied to the embedding.
at::Tensor denseRows(const at::Tensor& weight, const at::Tensor& ids);

// x [n, in], weight [out, in] in any layout, bias [out] or undefined -> [n, out].
at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// x [n, in], weight [in, out] (GPT-2's Conv1D), bias [out] -> [n, out].
at::Tensor denseInOut(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Kept for the loader's column-major path: weight [out, in] -> the same
// values with strides (1, out).
at::Tensor columnMajor(const at::Tensor& weight);

}  // namespace kvscope
