// The lean forward's per-element kernels (core/model/row_kernels.h) against
// their definitions in float64: SiLU(gate) * up, whose exp runs 16 lanes at a
// time on AVX-512 (the last vector masked), and GELU's tanh form.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/model/row_kernels.h"

namespace kvscope {
namespace {

TEST(RowKernels, SiluTimesUpWithinFloat32RoundingOfItsDefinition) {
  for (int64_t count : {1, 15, 16, 17, 704, 4867}) {  // whole vectors, a masked tail, a lone element
    torch::manual_seed(count);
    const auto gate = torch::randn({count}) * 6, up = torch::randn({count});
    auto out = torch::full({count + 1}, 42.0f);  // one past the end: must stay untouched
    gatedActivation(gate.data_ptr<float>(), up.data_ptr<float>(), out.data_ptr<float>(), count, /*gelu_tanh=*/false);
    const auto g = gate.to(torch::kFloat64), u = up.to(torch::kFloat64);
    const auto expected = g / (1 + torch::exp(-g)) * u;
    const auto got = out.narrow(0, 0, count).to(torch::kFloat64);
    EXPECT_LE(((got - expected).abs() / (expected.abs() + 1e-30)).max().item<double>(), 4e-7) << count;
    EXPECT_EQ(out[count].item<float>(), 42.0f) << count;
  }
}

TEST(RowKernels, AnElementGivesTheSameWhateverTheCount) {
  // A verify row's activations must be a decode step's: element i alone, or
  // inside a longer run at any offset, gives the same bits.
  torch::manual_seed(1);
  const auto gate = torch::randn({53}) * 4, up = torch::randn({53});
  auto all = torch::empty({53});
  gatedActivation(gate.data_ptr<float>(), up.data_ptr<float>(), all.data_ptr<float>(), 53, false);
  for (int64_t i = 0; i < 53; i += 7) {
    float one = 0;
    gatedActivation(gate.data_ptr<float>() + i, up.data_ptr<float>() + i, &one, 1, false);
    EXPECT_EQ(one, all[i].item<float>()) << i;
  }
}

TEST(RowKernels, GeluTanhWithinFloat32RoundingOfItsDefinition) {
  torch::manual_seed(2);
  const auto gate = torch::randn({300}) * 3, up = torch::randn({300});
  auto out = torch::empty({300});
  gatedActivation(gate.data_ptr<float>(), up.data_ptr<float>(), out.data_ptr<float>(), 300, /*gelu_tanh=*/true);
  const auto g = gate.to(torch::kFloat64);
  const auto expected = 0.5 * g * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g.pow(3)))) * up.to(torch::kFloat64);
  EXPECT_LE((out.to(torch::kFloat64) - expected).abs().max().item<double>() / expected.abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace kvscope
