// The few-row product kernel (core/model/few_rows.h) against a double
// precision reference, the weight layouts of core/model/dense.h, and the
// dense layers that route decode and verify sized inputs to the kernel.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "core/model/decoder_family.h"
#include "core/model/dense.h"
#include "core/model/few_rows.h"

namespace kvscope {
namespace {

// Float32 sums of `in` products in another order than the reference's:
// relative to the output's scale, a few ulps times sqrt(in); 1e-5 holds with
// margin up to in = 896.
constexpr double kFewRowsTolerance = 1e-5;

double fewRowsRelativeError(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>() + 1e-30;
  return (actual - expected).abs().max().item<double>() / scale;
}

// x [rows, in] * weight [out, in]^T in double precision -> float [rows, out].
at::Tensor referenceProduct(const at::Tensor& x, const at::Tensor& weight) {
  return torch::matmul(x.to(torch::kDouble), weight.t().to(torch::kDouble)).to(torch::kFloat);
}

using Shape = std::tuple<int64_t, int64_t, int64_t>;  // rows, in, out

class FewRowsShapes : public ::testing::TestWithParam<Shape> {};

// Both layouts, both instruction sets (where the CPU has them), 1 and 2 threads.
TEST_P(FewRowsShapes, MatchesTheReferenceInEveryLayout) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA: dense() uses BLAS";
  const auto [rows, in, out] = GetParam();
  torch::manual_seed(rows * 1000 + in + out);
  auto x = torch::randn({rows, in});      // [rows, in]
  auto weight = torch::randn({out, in});  // [out, in] (nn.Linear)
  auto expected = referenceProduct(x, weight);
  auto in_out = weight.t().contiguous();  // [in, out]
  std::vector<std::pair<std::string, FewRowsWeight>> layouts{
      {"[in, out]", FewRowsWeight::inOut(in_out.data_ptr<float>(), in, out)}};
  at::Tensor panels;
  if (out % kPanelWidth == 0) {
    // [out / 16, in, 16], whatever size packForInference would pack.
    panels = weight.reshape({out / kPanelWidth, kPanelWidth, in}).transpose(1, 2).contiguous();
    layouts.emplace_back("panels", FewRowsWeight::panels(panels.data_ptr<float>(), in, out));
  }
  const int saved = at::get_num_threads();
  for (const auto& [layout_name, layout] : layouts) {
    for (FewRowsIsa isa : {FewRowsIsa::Avx2, FewRowsIsa::Avx512}) {
      for (int threads : {1, 2}) {
        at::set_num_threads(threads);
        const std::string where = layout_name + (isa == FewRowsIsa::Avx2 ? ", AVX2, " : ", AVX-512, ") +
                                  std::to_string(threads) + " threads";
        auto y = torch::full({rows, out}, std::nanf(""));  // [rows, out]: unwritten entries stay NaN
        if (!fewRowsProduct(isa, x.data_ptr<float>(), rows, layout, y.data_ptr<float>())) continue;  // no such ISA
        EXPECT_FALSE(y.isnan().any().item<bool>()) << where;
        EXPECT_LT(fewRowsRelativeError(y, expected), kFewRowsTolerance) << where;
      }
    }
  }
  at::set_num_threads(saved);
}

// Rows 1..16 (passes of up to 8 rows, 6 with AVX2); widths with masked tails
// (out % 16 != 0, out under one block), panel counts that do not fill the
// last register block, and the bundled target's and a 0.5 B model's shapes.
// Each thread's share of 16-column vectors ends in a narrower block when the
// register block does not divide it: {5, 256, 200} splits 13 vectors 7 / 6
// and the second share ends in the partial vector; {3, 256, 100} splits 4 / 3.
INSTANTIATE_TEST_SUITE_P(Shapes, FewRowsShapes,
                         ::testing::Values(Shape{1, 7, 5}, Shape{1, 256, 2048}, Shape{2, 256, 704},
                                           Shape{3, 33, 37}, Shape{4, 256, 2048}, Shape{5, 256, 704},
                                           Shape{5, 704, 256}, Shape{6, 100, 129}, Shape{7, 64, 17},
                                           Shape{7, 40, 80}, Shape{8, 896, 896}, Shape{5, 896, 4864},
                                           Shape{8, 16, 16}, Shape{9, 256, 704}, Shape{13, 40, 37},
                                           Shape{16, 256, 2048}, Shape{5, 256, 200}, Shape{3, 256, 100}));

TEST(FewRows, RefusesRowCountsOutsideItsRange) {
  float x[1] = {1}, w[1] = {1}, y[1] = {0};
  const auto weight = FewRowsWeight::inOut(w, 1, 1);
  EXPECT_FALSE(fewRowsProduct(x, 0, weight, y));
  EXPECT_FALSE(fewRowsProduct(x, kFewRowsMax + 1, weight, y));
}

TEST(DenseLayouts, PanelsHoldTheWeightsValues) {
  torch::manual_seed(3);
  auto weight = torch::randn({48, 20});  // [out, in]
  auto packed = packForInference(weight);
  if (!fewRowsSupported()) {
    EXPECT_FALSE(isPanels(packed)) << "without the kernel, weights stay column-major";
    return;
  }
  ASSERT_TRUE(isPanels(packed));
  EXPECT_EQ(packed.sizes(), at::IntArrayRef({3, 20, 16}));
  EXPECT_EQ(denseShape(packed), (std::vector<int64_t>{48, 20}));
  EXPECT_TRUE(torch::equal(denseMatrix(packed), weight));
  auto ids = torch::tensor({0, 15, 16, 47, 31}, torch::kInt64);
  EXPECT_TRUE(torch::equal(denseRows(packed, ids), weight.index_select(0, ids)));
  // A width that is not a multiple of 16 stays column-major.
  auto odd = packForInference(torch::randn({37, 20}));
  EXPECT_FALSE(isPanels(odd));
  EXPECT_TRUE(isInferenceLayout(odd));
  EXPECT_FALSE(isInferenceLayout(weight));  // row-major: the training layout
  // A weight over kPanelMaxBytes stays column-major (BLAS's gemv streams it faster).
  const int64_t rows_over = kPanelMaxBytes / (64 * 4) + 16;
  auto large = packForInference(torch::zeros({rows_over, 64}));
  EXPECT_FALSE(isPanels(large));
  EXPECT_TRUE(isInferenceLayout(large));
}

TEST(DenseLayouts, EveryLayoutGivesLinearsResultForEveryRowCount) {
  torch::InferenceMode guard;
  torch::manual_seed(7);
  auto weight = torch::randn({96, 80});  // [out, in]
  auto bias = torch::randn({96});
  auto panels = packForInference(weight);
  auto column_major = columnMajor(weight);
  auto conv1d = weight.t().contiguous();  // [in, out] (GPT-2)
  // 1 row (decode), 2..16 (verify: the kernel), 17..40 (panels: the kernel
  // in passes of 16; the other layouts: BLAS).
  for (int64_t rows : {1, 2, 3, 5, 8, 9, 16, 17, 40}) {
    auto x = torch::randn({rows, 80});
    auto expected = referenceProduct(x, weight) + bias;
    for (const auto& [name, stored] : {std::pair{"panels", panels}, std::pair{"column-major", column_major},
                                       std::pair{"row-major", weight}}) {
      EXPECT_LT(fewRowsRelativeError(dense(x, stored, bias), expected), kFewRowsTolerance) << name << ", " << rows;
      EXPECT_LT(fewRowsRelativeError(dense(x, stored), expected - bias), kFewRowsTolerance) << name << ", " << rows;
    }
    EXPECT_LT(fewRowsRelativeError(denseInOut(x, conv1d, bias), expected), kFewRowsTolerance) << rows;
    // A non-contiguous input (a strided view) gives the same product.
    auto wide = torch::randn({rows, 160});
    auto strided = wide.slice(1, 0, 160, 2);  // [rows, 80], stride 2
    EXPECT_LT(fewRowsRelativeError(dense(strided, panels, bias), referenceProduct(strided, weight) + bias),
              kFewRowsTolerance);
  }
}

// With the kernel switched off (setFewRowsKernelEnabled), panel
// weights are unpacked for BLAS: the same product for every row count.
TEST(DenseLayouts, PanelsWithoutTheKernelGiveTheSameProduct) {
  torch::InferenceMode guard;
  torch::manual_seed(11);
  auto weight = torch::randn({96, 80});  // [out, in]
  auto bias = torch::randn({96});
  auto panels = packForInference(weight);
  ASSERT_TRUE(isPanels(panels));
  struct KernelOff {
    KernelOff() { setFewRowsKernelEnabled(false); }
    ~KernelOff() { setFewRowsKernelEnabled(true); }
  } off;
  for (int64_t rows : {1, 5, 17, 40}) {
    auto x = torch::randn({rows, 80});
    EXPECT_LT(fewRowsRelativeError(dense(x, panels, bias), referenceProduct(x, weight) + bias), kFewRowsTolerance)
        << rows;
  }
}

// A forward that wants no logits (a prefill) reaches the head with no rows:
// every layout gives an empty [0, out] product, with or without a bias.
TEST(DenseLayouts, NoRowsGiveAnEmptyProductInEveryLayout) {
  torch::InferenceMode guard;
  auto weight = torch::randn({96, 80});  // [out, in]
  auto bias = torch::randn({96});
  auto none = torch::randn({0, 80});
  for (const auto& [name, stored] : {std::pair{"panels", packForInference(weight)},
                                     std::pair{"column-major", columnMajor(weight)}, std::pair{"row-major", weight}}) {
    EXPECT_EQ(dense(none, stored, bias).sizes(), (std::vector<int64_t>{0, 96})) << name;
    EXPECT_EQ(dense(none, stored).sizes(), (std::vector<int64_t>{0, 96})) << name;
  }
  EXPECT_EQ(denseInOut(none, weight.t().contiguous(), bias).sizes(), (std::vector<int64_t>{0, 96}));
}

// q | k | v (+ biases) fused for inference: the parts become views of one
// panel matrix, and one product gives exactly the three products' values.
TEST(FusedProjections, OneProductEqualsThePartsAndStoresThemOnce) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA: no panels";
  torch::manual_seed(7);
  DecoderLayerWeights layer;
  layer.wq = packForInference(torch::randn({64, 48}));  // [out, in] -> panels [4, 48, 16]
  layer.wk = packForInference(torch::randn({32, 48}));
  layer.wv = packForInference(torch::randn({32, 48}));
  layer.bq = torch::randn({64});
  layer.bk = torch::randn({32});
  layer.bv = torch::randn({32});
  auto x = torch::randn({5, 48});  // [rows, in]
  std::vector<at::Tensor> separate;
  for (auto [w, b] : {std::pair{layer.wq, layer.bq}, {layer.wk, layer.bk}, {layer.wv, layer.bv}}) {
    separate.push_back(dense(x, w, b));  // [5, out]
  }
  const auto q_before = denseMatrix(layer.wq).clone();  // [64, 48]

  fuseProjections(layer);
  ASSERT_TRUE(layer.w_qkv.defined());
  ASSERT_TRUE(layer.b_qkv.defined());
  EXPECT_EQ(denseShape(layer.w_qkv), (std::vector<int64_t>{128, 48}));
  EXPECT_TRUE(torch::equal(dense(x, layer.w_qkv, layer.b_qkv), torch::cat(separate, 1)));  // bit-identical
  EXPECT_TRUE(torch::equal(denseMatrix(layer.wq), q_before));  // the part still reads as its checkpoint tensor
  const auto* fused = layer.w_qkv.data_ptr<float>();
  EXPECT_EQ(layer.wq.data_ptr<float>(), fused);  // views: stored once
  EXPECT_EQ(layer.wk.data_ptr<float>(), fused + 64 * 48);
  EXPECT_EQ(layer.wv.data_ptr<float>(), fused + 96 * 48);
  EXPECT_EQ(layer.bv.data_ptr<float>(), layer.b_qkv.data_ptr<float>() + 96);
}

// Parts the loader read straight into one tensor, one after another, are
// adopted as the fused matrix: no copy. Parts of one tensor out of order are
// copied, and either way each part reads as its own weight.
TEST(FusedProjections, AdoptsPartsThatAlreadyLieInOneTensor) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA: no panels";
  torch::manual_seed(8);
  const auto gate = torch::randn({64, 48}), up = torch::randn({32, 48});  // [out, in]
  const auto whole = torch::cat({packForInference(gate), packForInference(up)}, 0);  // [6, 48, 16]

  DecoderLayerWeights in_order;
  in_order.w_gate = whole.narrow(0, 0, 4);
  in_order.w_up = whole.narrow(0, 4, 2);
  fuseProjections(in_order);
  ASSERT_TRUE(in_order.w_gate_up.defined());
  EXPECT_EQ(in_order.w_gate_up.data_ptr(), whole.data_ptr());  // adopted
  EXPECT_EQ(in_order.w_gate_up.sizes(), whole.sizes());
  EXPECT_TRUE(torch::equal(denseMatrix(in_order.w_gate), gate));
  EXPECT_TRUE(torch::equal(denseMatrix(in_order.w_up), up));

  DecoderLayerWeights swapped;  // up's panels first in the tensor, gate's second
  const auto backwards = torch::cat({packForInference(up), packForInference(gate)}, 0);
  swapped.w_gate = backwards.narrow(0, 2, 4);
  swapped.w_up = backwards.narrow(0, 0, 2);
  fuseProjections(swapped);
  ASSERT_TRUE(swapped.w_gate_up.defined());
  EXPECT_NE(swapped.w_gate_up.data_ptr(), backwards.data_ptr());  // copied in fused order
  EXPECT_TRUE(torch::equal(denseMatrix(swapped.w_gate_up), torch::cat({gate, up}, 0)));
  EXPECT_TRUE(torch::equal(denseMatrix(swapped.w_gate), gate));
}

TEST(FusedProjections, LeavesLayersItCannotFuse) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA: no panels";
  DecoderLayerWeights some_biases;  // a bias on q only: no fused bias could stand for it
  some_biases.wq = packForInference(torch::randn({32, 16}));
  some_biases.wk = packForInference(torch::randn({16, 16}));
  some_biases.wv = packForInference(torch::randn({16, 16}));
  some_biases.bq = torch::randn({32});
  fuseProjections(some_biases);
  EXPECT_FALSE(some_biases.w_qkv.defined());

  DecoderLayerWeights row_major;  // training layout: autograd needs the parts as they are
  row_major.w_gate = torch::randn({32, 16});
  row_major.w_up = torch::randn({32, 16});
  fuseProjections(row_major);
  EXPECT_FALSE(row_major.w_gate_up.defined());
}

TEST(DenseLayouts, TrainingKeepsItsGradient) {
  // Both weights are laid out so the kernel would take them; with a gradient
  // required they must go through BLAS, whose product has a backward.
  auto in_out = torch::randn({8, 12}, torch::requires_grad());        // [in, out] (GPT-2)
  auto column_major = torch::randn({8, 12}, torch::requires_grad());  // storage of a column-major [12, 8]
  auto x = torch::randn({3, 8});
  auto y = denseInOut(x, in_out, torch::zeros({12})) + dense(x, column_major.t(), {});
  y.sum().backward();
  auto expected = x.sum(0).unsqueeze(1).expand({8, 12});  // d sum(x W) / dW
  ASSERT_TRUE(in_out.grad().defined());
  ASSERT_TRUE(column_major.grad().defined());
  EXPECT_LT(fewRowsRelativeError(in_out.grad(), expected), kFewRowsTolerance);
  EXPECT_LT(fewRowsRelativeError(column_major.grad(), expected), kFewRowsTolerance);
}

}  // namespace
}  // namespace kvscope
