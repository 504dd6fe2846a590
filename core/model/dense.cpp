#include "core/model/dense.h"

namespace kvscope {
namespace {

// weight_out_in: [out, in] (may be a transposed view); x: [1, in] -> [1, out].
at::Tensor oneRow(const at::Tensor& x, const at::Tensor& weight_out_in, const at::Tensor& bias) {
  auto row = x.select(0, 0);  // [in]
  auto y = bias.defined() ? torch::addmv(bias, weight_out_in, row) : torch::mv(weight_out_in, row);
  return y.unsqueeze(0);
}

}  // namespace

at::Tensor columnMajor(const at::Tensor& weight) {
  if (weight.dim() != 2 || weight.t().is_contiguous()) return weight;
  return weight.t().contiguous().t();  // [out, in], strides (1, out)
}

at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() == 2 && x.size(0) == 1) return oneRow(x, weight, bias);
  return torch::linear(x, weight, bias);
}

at::Tensor denseInOut(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() == 2 && x.size(0) == 1) return oneRow(x, weight.t(), bias);
  return torch::addmm(bias, x, weight);
}

}  // namespace kvscope
