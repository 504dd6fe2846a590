#include "core/model/dense.h"

#include <algorithm>
#include <limits>

#include "core/model/few_rows.h"

namespace kvscope {
namespace {

// Rows up to which a column-major weight goes to the kernel: one pass over
// the weight. Column-major weights are the large ones, read from memory, and
// each further pass reads them again (0.5 B model, 2 threads, one forward
// over a 100-row cache: 5 rows 191 ms vs 334 ms through BLAS, but 9 rows,
// two passes, 356 vs 237 ms).
constexpr int64_t kColumnMajorRowsMax = 8;
// Panels take any number of rows (see dense()).
constexpr int64_t kAnyRows = std::numeric_limits<int64_t>::max();

bool kernelTakes(const at::Tensor& x, const at::Tensor& weight, int64_t max_rows) {
  if (x.dim() != 2 || x.size(0) < 1 || x.size(0) > max_rows || !fewRowsSupported()) return false;
  if (x.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat) return false;
  if (!x.device().is_cpu() || !weight.device().is_cpu()) return false;
  // The kernel has no backward: training goes through BLAS.
  return !(at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
}

// x [n, in] -> [n, out] through the kernel, kFewRowsMax rows at a time.
at::Tensor kernelProduct(const at::Tensor& x, const FewRowsWeight& weight, const at::Tensor& bias) {
  auto input = x.contiguous();                                 // [n, in]
  auto y = at::empty({x.size(0), weight.out}, x.options());  // [n, out]
  for (int64_t r = 0; r < x.size(0); r += kFewRowsMax) {
    fewRowsProduct(input.data_ptr<float>() + r * weight.in, std::min(kFewRowsMax, x.size(0) - r), weight,
                   y.data_ptr<float>() + r * weight.out);
  }
  if (bias.defined()) y.add_(bias);
  return y;
}

// weight [in, out], contiguous.
FewRowsWeight inOutLayout(const at::Tensor& weight) {
  return FewRowsWeight::inOut(weight.data_ptr<float>(), weight.size(0), weight.size(1));
}

FewRowsWeight panelLayout(const at::Tensor& panels) {
  return FewRowsWeight::panels(panels.data_ptr<float>(), panels.size(1), panels.size(0) * kPanelWidth);
}

// x [n, in] (any n) times panels [P, in, 16] -> [n, P * 16] with BLAS, on an
// unpacked [in, out] copy (panels are at most kPanelMaxBytes).
at::Tensor panelsByBlas(const at::Tensor& x, const at::Tensor& panels, const at::Tensor& bias) {
  const int64_t in = panels.size(1), out = panels.size(0) * kPanelWidth;
  auto in_out = panels.permute({1, 0, 2}).reshape({in, out});  // [in, out], a copy
  auto rows = x.reshape({-1, in});                              // [n, in]
  auto y = bias.defined() ? at::addmm(bias, rows, in_out) : at::mm(rows, in_out);  // [n, out]
  auto shape = x.sizes().vec();
  shape.back() = out;
  return y.view(shape);  // [..., out]
}

// weight_out_in: [out, in] (may be a transposed view); x: [1, in] -> [1, out].
at::Tensor oneRow(const at::Tensor& x, const at::Tensor& weight_out_in, const at::Tensor& bias) {
  auto row = x.select(0, 0);  // [in]
  auto y = bias.defined() ? torch::addmv(bias, weight_out_in, row) : torch::mv(weight_out_in, row);
  return y.unsqueeze(0);
}

// x [..., in] with no rows -> [..., out], empty. A forward that wants no
// logits (a prefill) reaches the head with none, and a panel weight would
// otherwise be unpacked for BLAS to multiply nothing (0.7 ms per prefill on
// the bundled target).
at::Tensor noRows(const at::Tensor& x, int64_t out) {
  auto shape = x.sizes().vec();
  shape.back() = out;
  return at::empty(shape, x.options());
}

}  // namespace

bool packsIntoPanels(int64_t out, int64_t in, c10::ScalarType dtype) {
  const int64_t bytes = out * in * static_cast<int64_t>(sizeof(float));
  return dtype == at::kFloat && out > 0 && out % kPanelWidth == 0 && bytes <= kPanelMaxBytes && fewRowsSupported();
}

at::Tensor packForInference(const at::Tensor& weight) {
  if (weight.dim() != 2) return weight;
  if (!packsIntoPanels(weight.size(0), weight.size(1), weight.scalar_type())) return columnMajor(weight);
  const int64_t out = weight.size(0), in = weight.size(1);
  return weight.reshape({out / kPanelWidth, kPanelWidth, in}).transpose(1, 2).contiguous();  // [P, in, 16]
}

bool isPanels(const at::Tensor& weight) { return weight.dim() == 3; }

bool isInferenceLayout(const at::Tensor& weight) {
  return isPanels(weight) || (weight.dim() == 2 && !weight.is_contiguous() && weight.t().is_contiguous());
}

std::vector<int64_t> denseShape(const at::Tensor& weight) {
  if (isPanels(weight)) return {weight.size(0) * kPanelWidth, weight.size(1)};
  return weight.sizes().vec();
}

at::Tensor denseMatrix(const at::Tensor& weight) {
  if (!isPanels(weight)) return weight;
  return weight.transpose(1, 2).reshape({weight.size(0) * kPanelWidth, weight.size(1)});  // [out, in]
}

at::Tensor denseRows(const at::Tensor& weight, const at::Tensor& ids) {
  if (!isPanels(weight)) return weight.index_select(0, ids);
  // Row j of [out, in] is column j % 16 of panel j / 16: [n, in].
  using torch::indexing::Slice;
  return weight.index({ids.div(kPanelWidth, "floor"), Slice(), ids.remainder(kPanelWidth)});
}

at::Tensor columnMajor(const at::Tensor& weight) {
  if (weight.dim() != 2 || weight.t().is_contiguous()) return weight;
  return weight.t().contiguous().t();  // [out, in], strides (1, out)
}

at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.numel() == 0) return noRows(x, denseShape(weight)[0]);
  if (isPanels(weight)) {
    // Panels stay in cache, so every pass of 16 rows reads them from there:
    // bundled target, 2 threads, a 17 / 32 / 64 / 128-row forward 3.5 / 4.4 /
    // 6.3 / 11.5 ms unpacking the panels for BLAS, 2.0 / 2.9 / 5.0 / 10.0 ms
    // here (256 rows: equal).
    if (kernelTakes(x, weight, kAnyRows)) return kernelProduct(x, panelLayout(weight), bias);
    return panelsByBlas(x, weight, bias);
  }
  if (x.dim() == 2 && x.size(0) == 1) return oneRow(x, weight, bias);
  if (weight.t().is_contiguous() && kernelTakes(x, weight, kColumnMajorRowsMax)) {
    return kernelProduct(x, inOutLayout(weight.t()), bias);
  }
  return torch::linear(x, weight, bias);
}

at::Tensor denseInOut(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.numel() == 0) return noRows(x, weight.size(1));
  if (x.dim() == 2 && x.size(0) == 1) return oneRow(x, weight.t(), bias);
  if (weight.is_contiguous() && kernelTakes(x, weight, kColumnMajorRowsMax)) {
    return kernelProduct(x, inOutLayout(weight), bias);
  }
  return torch::addmm(bias, x, weight);
}

}  // namespace kvscope
