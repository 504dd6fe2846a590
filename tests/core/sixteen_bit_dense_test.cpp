// bfloat16 and float16 weights in the few-row kernel and the dense layers
// (core/model/few_rows.h, core/model/dense.h): widened in registers, they
// give bit for bit the float32 product of the widened weight, in both
// layouts, both instruction sets and for every row count up to 16; a
// many-row product (a prefill) goes through the kernel too, over any split of
// its rows, and BLAS over widened tiles only with the kernel switched off.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "core/model/dense.h"
#include "core/model/few_rows.h"

namespace kvscope {
namespace {

FewRowsType sixteenBitType(c10::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? FewRowsType::BF16 : FewRowsType::F16;
}

double relativeErrorOf(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>() + 1e-30;
  return (actual - expected).abs().max().item<double>() / scale;
}

using SixteenBitShape = std::tuple<int64_t, int64_t, int64_t>;  // rows, in, out

class SixteenBitKernel : public ::testing::TestWithParam<SixteenBitShape> {};

TEST_P(SixteenBitKernel, GivesTheWidenedWeightsProductBitForBit) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  const auto [rows, in, out] = GetParam();
  torch::manual_seed(rows * 100 + in + out);
  auto x = torch::randn({rows, in});  // [rows, in]
  const int saved = at::get_num_threads();
  for (const auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    auto weight = torch::randn({out, in}).to(dtype);  // [out, in], as stored
    auto widened = weight.to(torch::kFloat32);
    auto in_out16 = weight.t().contiguous(), in_out32 = widened.t().contiguous();  // [in, out]
    auto panels16 = weight.reshape({out / kPanelWidth, kPanelWidth, in}).transpose(1, 2).contiguous();
    auto panels32 = panels16.to(torch::kFloat32);  // [out / 16, in, 16]
    const std::vector<std::tuple<std::string, FewRowsWeight, FewRowsWeight>> layouts{
        {"[in, out]", FewRowsWeight::inOut(in_out16.data_ptr(), sixteenBitType(dtype), in, out),
         FewRowsWeight::inOut(in_out32.data_ptr<float>(), in, out)},
        {"panels", FewRowsWeight::panels(panels16.data_ptr(), sixteenBitType(dtype), in, out),
         FewRowsWeight::panels(panels32.data_ptr<float>(), in, out)}};
    for (const auto& [name, sixteen, wide] : layouts) {
      for (FewRowsIsa isa : {FewRowsIsa::Avx2, FewRowsIsa::Avx512}) {
        for (int threads : {1, 2}) {
          at::set_num_threads(threads);
          const std::string where = name + ", " + c10::toString(dtype) +
                                    (isa == FewRowsIsa::Avx2 ? ", AVX2, " : ", AVX-512, ") + std::to_string(threads);
          auto y16 = torch::full({rows, out}, std::nanf("")), y32 = torch::full({rows, out}, std::nanf(""));
          if (!fewRowsProduct(isa, x.data_ptr<float>(), rows, sixteen, y16.data_ptr<float>())) continue;
          ASSERT_TRUE(fewRowsProduct(isa, x.data_ptr<float>(), rows, wide, y32.data_ptr<float>())) << where;
          EXPECT_FALSE(y16.isnan().any().item<bool>()) << where;
          EXPECT_TRUE(torch::equal(y16, y32)) << where << ": max difference "
                                              << (y16 - y32).abs().max().item<double>();
          EXPECT_LT(relativeErrorOf(y16, torch::matmul(x.to(torch::kDouble), widened.t().to(torch::kDouble)).to(torch::kFloat)), 1e-5) << where;
        }
      }
    }
  }
  at::set_num_threads(saved);
}

// Single passes (1-8 rows), grouped passes sharing each weight block (9-16
// rows; 7-16 with AVX2), inputs that end inside a 256-input step, widths
// that leave a narrower last block.
INSTANTIATE_TEST_SUITE_P(Shapes, SixteenBitKernel,
                         ::testing::Values(SixteenBitShape{1, 896, 256}, SixteenBitShape{2, 40, 16},
                                           SixteenBitShape{5, 300, 80}, SixteenBitShape{7, 64, 112},
                                           SixteenBitShape{8, 257, 48}, SixteenBitShape{9, 600, 208},
                                           SixteenBitShape{12, 33, 32}, SixteenBitShape{16, 520, 96}));

// A prefill's product: any number of rows in one call, kManyRowsChunk per
// pass over the weight, sums each output in the order fewRowsProduct does, so
// it equals 16-row calls bit for bit (and so the float32 weight's product).
TEST(SixteenBitManyRows, EqualsSixteenRowCallsBitForBit) {
  if (!fewRowsSupported()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  const int64_t in = 300, out = 80;
  for (const int64_t rows : {int64_t{17}, int64_t{40}, kManyRowsChunk + 37}) {
    torch::manual_seed(rows);
    auto x = torch::randn({rows, in});  // [rows, in]
    for (const auto dtype : {torch::kBFloat16, torch::kFloat16, torch::kFloat32}) {
      auto panels = torch::randn({out / kPanelWidth, in, kPanelWidth}).to(dtype);  // [out / 16, in, 16]
      const FewRowsType type = dtype == torch::kFloat32 ? FewRowsType::F32 : sixteenBitType(dtype);
      const auto weight = FewRowsWeight::panels(panels.data_ptr(), type, in, out);
      for (FewRowsIsa isa : {FewRowsIsa::Avx2, FewRowsIsa::Avx512}) {
        const std::string where = std::to_string(rows) + " rows, " + c10::toString(dtype) +
                                  (isa == FewRowsIsa::Avx2 ? ", AVX2" : ", AVX-512");
        auto many = torch::full({rows, out}, std::nanf("")), chunks = torch::full({rows, out}, std::nanf(""));
        if (!manyRowsProduct(isa, x.data_ptr<float>(), rows, weight, many.data_ptr<float>())) continue;
        for (int64_t r = 0; r < rows; r += kFewRowsMax) {
          ASSERT_TRUE(fewRowsProduct(isa, x.data_ptr<float>() + r * in, std::min(kFewRowsMax, rows - r), weight,
                                     chunks.data_ptr<float>() + r * out)) << where;
        }
        EXPECT_FALSE(many.isnan().any().item<bool>()) << where;
        EXPECT_TRUE(torch::equal(many, chunks)) << where << ": max difference "
                                                << (many - chunks).abs().max().item<double>();
      }
    }
  }
}

TEST(SixteenBitKernelLimits, RefusesPartialVectorsOfASixteenBitWeight) {
  if (!fewRowsSupported()) GTEST_SKIP();
  auto w = torch::zeros({8, 20}, torch::kBFloat16);  // [in, out], out not a multiple of 16
  auto x = torch::ones({1, 8});
  auto y = torch::zeros({1, 20});
  EXPECT_FALSE(fewRowsProduct(x.data_ptr<float>(), 1, FewRowsWeight::inOut(w.data_ptr(), FewRowsType::BF16, 8, 20),
                              y.data_ptr<float>()));
}

TEST(SixteenBitKernelLimits, WidenVectorsCopiesTheChosenColumns) {
  torch::manual_seed(5);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    auto weight = torch::randn({64, 24}).to(dtype);  // [out, in]
    auto panels = weight.reshape({4, kPanelWidth, 24}).transpose(1, 2).contiguous();  // [4, 24, 16]
    auto in_out = weight.t().contiguous();                                          // [24, 64]
    auto expected = weight.to(torch::kFloat32).t().narrow(1, 16, 32);               // [24, 32]: vectors 1, 2
    for (const FewRowsWeight& layout : {FewRowsWeight::panels(panels.data_ptr(), sixteenBitType(dtype), 24, 64),
                                        FewRowsWeight::inOut(in_out.data_ptr(), sixteenBitType(dtype), 24, 64)}) {
      auto tile = torch::full({24, 32}, std::nanf(""));
      widenVectors(layout, 1, 2, tile.data_ptr<float>());
      EXPECT_TRUE(torch::equal(tile, expected)) << c10::toString(dtype);
    }
  }
  // float32 with a partial last vector: its missing columns are zeros.
  auto weight = torch::randn({20, 6});  // [out, in]
  auto in_out = weight.t().contiguous();
  auto tile = torch::full({6, 32}, std::nanf(""));
  widenVectors(FewRowsWeight::inOut(in_out.data_ptr<float>(), 6, 20), 0, 2, tile.data_ptr<float>());
  EXPECT_TRUE(torch::equal(tile.narrow(1, 0, 20), in_out));
  EXPECT_TRUE(torch::equal(tile.narrow(1, 20, 12), torch::zeros({6, 12})));
}

// dense() and denseInOut() on 16-bit weights against the product of the
// widened weight: small panels and panels over kPanelMaxBytes in float32 (any
// rows through the kernel, bit for bit the kernel's product of the widened
// panels), and GPT-2's [in, out]; with the kernel switched off, widened tiles
// and BLAS.
TEST(SixteenBitDense, EveryRouteGivesTheWidenedWeightsProduct) {
  torch::InferenceMode guard;
  torch::manual_seed(11);
  const int64_t in = 640, large_out = 1024;  // 2.6 MB in float32: over kPanelMaxBytes
  ASSERT_GT(large_out * in * 4, kPanelMaxBytes);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (const int64_t out : {int64_t{96}, large_out}) {
      auto weight = torch::randn({out, in}).to(dtype);  // [out, in]
      auto widened = weight.to(torch::kFloat32);
      auto bias = torch::randn({out});
      auto packed = packForInference(weight);
      if (!fewRowsSupported()) {
        EXPECT_FALSE(isPanels(packed));
        continue;
      }
      ASSERT_TRUE(isPanels(packed)) << "16-bit weights are panels at any size";
      EXPECT_EQ(packed.scalar_type(), dtype);
      for (const int64_t rows : {1, 5, 16, 17, 40}) {
        auto x = torch::randn({rows, in});
        auto expected = torch::matmul(x.to(torch::kDouble), widened.t().to(torch::kDouble)).to(torch::kFloat) + bias;
        const std::string where = std::string(c10::toString(dtype)) + ", out " + std::to_string(out) + ", " +
                                  std::to_string(rows) + " rows";
        auto y = dense(x, packed, bias);
        EXPECT_EQ(y.scalar_type(), torch::kFloat32) << where;
        EXPECT_LT(relativeErrorOf(y, expected), 1e-5) << where;
        // Every row count the kernel: exactly its product of the float32 panels.
        auto panels32 = packed.to(torch::kFloat32).contiguous();  // [out / 16, in, 16]
        auto kernel = torch::empty({rows, out});
        ASSERT_TRUE(manyRowsProduct(x.data_ptr<float>(), rows, FewRowsWeight::panels(panels32.data_ptr<float>(), in, out),
                                    kernel.data_ptr<float>()));
        EXPECT_TRUE(torch::equal(y, kernel + bias)) << where;
        EXPECT_LT(relativeErrorOf(denseInOut(x, weight.t().contiguous(), bias), expected), 1e-5) << where;
        // The kernel switched off: widened tiles for BLAS (or BLAS's gemv).
        setFewRowsKernelEnabled(false);
        auto tiles = dense(x, packed, bias);
        setFewRowsKernelEnabled(true);
        EXPECT_LT(relativeErrorOf(tiles, expected), 1e-5) << where << ", kernel off";
      }
      // Row lookups (an embedding) come back in float32.
      auto ids = torch::tensor({int64_t{0}, int64_t{17}, out - 1}, torch::kInt64);
      EXPECT_TRUE(torch::equal(denseRows(packed, ids), widened.index_select(0, ids)));
    }
  }
}

}  // namespace
}  // namespace kvscope
