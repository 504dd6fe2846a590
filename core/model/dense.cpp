#include "core/model/dense.h"

#include <algorithm>
#include <limits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/model/few_rows.h"
#include "core/model/row_kernels.h"

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

// Weights up to kPanelMaxBytes in float32 (whatever their dtype) stay in
// cache, so they take any number of rows through the kernel, as float32
// panels do; and a 16-bit weight and its float32 widening then take the same
// route for every row count, so their sums are the same.
bool cacheResident(const at::Tensor& weight) {
  return weight.numel() * static_cast<int64_t>(sizeof(float)) <= kPanelMaxBytes;
}

bool kernelTakes(const at::Tensor& x, const at::Tensor& weight, int64_t max_rows) {
  if (x.dim() != 2 || x.size(0) < 1 || x.size(0) > max_rows || !fewRowsSupported()) return false;
  const bool weight_ok = weight.scalar_type() == at::kFloat || isSixteenBit(weight.scalar_type());
  if (x.scalar_type() != at::kFloat || !weight_ok) return false;
  if (!x.device().is_cpu() || !weight.device().is_cpu()) return false;
  // The kernel has no backward: training goes through BLAS.
  return !(at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
}

// x [n, in] -> [n, out] through the kernel (any n: manyRowsProduct sums each
// output as fewRowsProduct does).
at::Tensor kernelProduct(const at::Tensor& x, const FewRowsWeight& weight, const at::Tensor& bias) {
  auto input = x.contiguous();                                 // [n, in]
  auto y = at::empty({x.size(0), weight.out}, x.options());  // [n, out]
  const bool ran = manyRowsProduct(input.data_ptr<float>(), x.size(0), weight, y.data_ptr<float>());
  TORCH_CHECK(ran, "few-row kernel refused a product kernelTakes() accepted");
  if (bias.defined()) y.add_(bias);
  return y;
}

FewRowsType fewRowsType(c10::ScalarType dtype) {
  if (dtype == at::kBFloat16) return FewRowsType::BF16;
  if (dtype == at::kHalf) return FewRowsType::F16;
  return FewRowsType::F32;
}

// weight [in, out], contiguous.
FewRowsWeight inOutLayout(const at::Tensor& weight) {
  return FewRowsWeight::inOut(weight.data_ptr(), fewRowsType(weight.scalar_type()), weight.size(0),
                              weight.size(1));
}

FewRowsWeight panelLayout(const at::Tensor& panels) {
  return FewRowsWeight::panels(panels.data_ptr(), fewRowsType(panels.scalar_type()), panels.size(1),
                               panels.size(0) * kPanelWidth);
}

// Output columns per tile a many-row product over a 16-bit weight widens for
// BLAS when the kernel is switched off: about kPanelMaxBytes of float32, so
// the tile is still in cache when BLAS packs it.
int64_t tileVectors(int64_t in) {
  return std::max<int64_t>(1, kPanelMaxBytes / (in * kPanelWidth * static_cast<int64_t>(sizeof(float))));
}

// x [n, in] (float32, contiguous) times a 16-bit weight -> [n, out]: each
// tile of columns widened to float32 [in, tile] and multiplied by BLAS into
// its columns of y. No float32 copy of the whole weight exists. Only with the
// kernel switched off (benchmarks measuring what it gains): otherwise the
// kernel takes every row count (manyRowsProduct in few_rows.h says why).
at::Tensor widenedTiles(const at::Tensor& x, const FewRowsWeight& weight, const at::Tensor& bias) {
  const int64_t vectors = weight.out / kPanelWidth, per_tile = std::min(vectors, tileVectors(weight.in));
  auto y = at::empty({x.size(0), weight.out}, x.options());                    // [n, out]
  auto buffer = at::empty({weight.in * per_tile * kPanelWidth}, x.options());  // [in * tile] floats
  for (int64_t v = 0; v < vectors; v += per_tile) {
    const int64_t count = std::min(per_tile, vectors - v), width = count * kPanelWidth;
    auto tile = buffer.narrow(0, 0, weight.in * width).view({weight.in, width});  // [in, width]
    widenVectors(weight, v, count, tile.data_ptr<float>());
    auto columns = y.narrow(1, v * kPanelWidth, width);  // [n, width], row stride out
    // The bias inside the product, as torch::linear and addmm add it.
    if (bias.defined()) at::addmm_out(columns, bias.narrow(0, v * kPanelWidth, width), x, tile);
    else at::mm_out(columns, x, tile);
  }
  return y;
}

// x [..., in] times a bfloat16 / float16 weight: panels [P, in, 16], or
// [in, out] contiguous (in_out: GPT-2's Conv1D). See dense.h.
at::Tensor sixteenBitProduct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool in_out) {
  const bool usable = (isPanels(weight) || (in_out && weight.is_contiguous())) && x.scalar_type() == at::kFloat;
  const FewRowsWeight layout = usable ? (in_out ? inOutLayout(weight) : panelLayout(weight)) : FewRowsWeight{};
  const bool training = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  if (!usable || layout.out % kPanelWidth != 0 || training) {
    // Not a layout the kernel reads (a weight re-stored by hand, or one for
    // training): a float32 copy, as the weight's checkpoint would load.
    const auto widened = weight.to(at::kFloat);
    return in_out ? denseInOut(x, widened, bias) : dense(x, widened, bias);
  }
  auto shape = x.sizes().vec();
  shape.back() = layout.out;
  auto rows = x.reshape({-1, layout.in}).contiguous();  // [n, in]
  if (kernelTakes(rows, weight, kAnyRows)) return kernelProduct(rows, layout, bias).view(shape);
  return widenedTiles(rows, layout, bias).view(shape);  // [..., out]
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

// Element (t, c) of a weight [out, in] in any layout, widened to float32.
template <typename T>
void gatherRows(const at::Tensor& weight, const int64_t* ids, int64_t n, float* out) {
  const T* data = weight.data_ptr<T>();
  const bool panels = isPanels(weight);
  const int64_t in = weight.size(1), step = weight.stride(1);  // panels [P, in, 16] or [out, in]: input c at c * step
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = ids[r];
    // Panels: row t of [out, in] is column t % 16 of panel t / 16.
    const T* first = panels ? data + (t / kPanelWidth) * weight.stride(0) + t % kPanelWidth : data + t * weight.stride(0);
    for (int64_t c = 0; c < in; ++c) out[r * in + c] = static_cast<float>(first[c * step]);
  }
}

}  // namespace

void denseInto(const float* x, int64_t rows, int64_t in, const at::Tensor& weight, const at::Tensor& bias, float* y) {
  const int64_t out = denseShape(weight)[0];
  // The cases dense() hands the few-row kernel for up to 16 rows (kernelTakes
  // on x holds: float32 rows on the CPU), in the same layout, so the sums are the same.
  const bool weight_ok = weight.scalar_type() == at::kFloat || isSixteenBit(weight.scalar_type());
  const bool float_bias = !bias.defined() || (bias.scalar_type() == at::kFloat && bias.is_contiguous());
  const bool training = at::GradMode::is_enabled() && weight.requires_grad();
  FewRowsWeight layout;
  bool direct = false;
  if (rows >= 1 && rows <= kFewRowsMax && weight_ok && float_bias && !training && weight.device().is_cpu() &&
      fewRowsSupported()) {
    if (isPanels(weight)) {
      layout = panelLayout(weight);
      direct = true;
    } else if (weight.scalar_type() == at::kFloat && weight.dim() == 2 && rows >= 2 && rows <= kColumnMajorRowsMax &&
               weight.t().is_contiguous()) {
      layout = inOutLayout(weight.t());
      direct = true;
    }
  }
  if (direct && fewRowsProduct(x, rows, layout, y)) {
    if (bias.defined()) addBiasRows(y, bias.data_ptr<float>(), rows, out, out);  // after the product, as kernelProduct adds it
    return;
  }
  const auto input = at::from_blob(const_cast<float*>(x), {rows, in}, at::kFloat);
  at::from_blob(y, {rows, out}, at::kFloat).copy_(dense(input, weight, bias));
}

void denseRowsInto(const at::Tensor& weight, const int64_t* ids, int64_t n, float* out) {
  switch (weight.scalar_type()) {
    case at::kFloat: return gatherRows<float>(weight, ids, n, out);
    case at::kBFloat16: return gatherRows<c10::BFloat16>(weight, ids, n, out);
    case at::kHalf: return gatherRows<c10::Half>(weight, ids, n, out);
    default: {
      const at::Tensor rows = denseRows(weight, at::from_blob(const_cast<int64_t*>(ids), {n}, at::kLong));
      at::from_blob(out, rows.sizes(), at::kFloat).copy_(rows);
    }
  }
}

bool isSixteenBit(c10::ScalarType dtype) { return dtype == at::kBFloat16 || dtype == at::kHalf; }

bool packsIntoPanels(int64_t out, int64_t in, c10::ScalarType dtype) {
  if (out <= 0 || out % kPanelWidth != 0) return false;
  // 16-bit weights: panels at any size, the kernel being their only reader
  // that needs no float32 copy (dense.h).
  if (isSixteenBit(dtype)) return fewRowsCpuSupported();
  const int64_t bytes = out * in * static_cast<int64_t>(sizeof(float));
  return dtype == at::kFloat && bytes <= kPanelMaxBytes && fewRowsSupported();
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
  at::Tensor rows;  // [n, in]
  if (!isPanels(weight)) {
    rows = weight.index_select(0, ids);
  } else {
    // Row j of [out, in] is column j % 16 of panel j / 16.
    using torch::indexing::Slice;
    rows = weight.index({ids.div(kPanelWidth, "floor"), Slice(), ids.remainder(kPanelWidth)});
  }
  return isSixteenBit(rows.scalar_type()) ? rows.to(at::kFloat) : rows;
}

at::Tensor columnMajor(const at::Tensor& weight) {
  if (weight.dim() != 2 || weight.t().is_contiguous()) return weight;
  return weight.t().contiguous().t();  // [out, in], strides (1, out)
}

at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.numel() == 0) return noRows(x, denseShape(weight)[0]);
  if (isSixteenBit(weight.scalar_type())) {
    // Column-major (out not a multiple of 16) or row-major: BLAS's layouts.
    if (!isPanels(weight)) return dense(x, weight.to(at::kFloat), bias);
    return sixteenBitProduct(x, weight, bias, /*in_out=*/false);
  }
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
  if (isSixteenBit(weight.scalar_type())) return sixteenBitProduct(x, weight, bias, /*in_out=*/true);
  // Small ones (in cache) to the kernel for any rows, like panels: then a
  // 16-bit Conv1D weight and its float32 widening sum alike.
  if (weight.is_contiguous() && cacheResident(weight) && kernelTakes(x, weight, kAnyRows)) {
    return kernelProduct(x, inOutLayout(weight), bias);
  }
  if (x.dim() == 2 && x.size(0) == 1) return oneRow(x, weight.t(), bias);
  if (weight.is_contiguous() && kernelTakes(x, weight, kColumnMajorRowsMax)) {
    return kernelProduct(x, inOutLayout(weight), bias);
  }
  return torch::addmm(bias, x, weight);
}

}  // namespace kvscope
