#pragma once
// The dense layers of every model, with a fast path for one row. A cached
// decode step feeds a single token, and libtorch sends a [1, in] x [in, out]
// product to BLAS sgemm, which packs (copies) the whole weight matrix before
// multiplying: with OpenBLAS 0.3.21 that is several times slower than the
// matrix-vector product (gemv), which streams each weight once. Decoding is
// bound by reading the weights, so one row goes through gemv here.
#include <ATen/core/Tensor.h>

namespace kvscope {

// weight [out, in] with the same values, stored column-major (its transpose
// contiguous). A product of a few rows (a verify pass) with a row-major
// [out, in] weight reaches sgemm as a transposed operand, and OpenBLAS 0.3.21
// spends most of such a call repacking that transpose (55% of a 5-row forward
// of the bundled target); column-major storage makes it the plain operand
// (3x faster at 256-1408 wide, equal at 0.5 B sizes), and one row still
// streams through gemv.
at::Tensor columnMajor(const at::Tensor& weight);

// x [n, in], weight [out, in] (nn.Linear), bias [out] or undefined -> [n, out].
at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// x [n, in], weight [in, out] (GPT-2's Conv1D), bias [out] -> [n, out].
at::Tensor denseInOut(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace kvscope
