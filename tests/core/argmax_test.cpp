// argmaxOf (core/decode/sampling.h), the drafter's greedy pick, against
// torch's argmax: random rows, ties (the first wins), NaN (the first NaN
// wins), and rows its plain loop does not read (a strided view, float64),
// which go to torch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "core/decode/sampling.h"

namespace kvscope {
namespace {

TEST(ArgmaxOf, IsTorchsArgmax) {
  torch::manual_seed(4);
  for (int trial = 0; trial < 50; ++trial) {
    auto row = torch::randn({2048});
    if (trial % 5 == 1) row = row.round();  // many ties at the top
    if (trial % 5 == 2) row.index_put_({trial * 37}, std::numeric_limits<float>::quiet_NaN());
    if (trial % 5 == 3) {
      row.index_put_({trial * 11}, std::numeric_limits<float>::quiet_NaN());
      row.index_put_({trial * 13}, std::numeric_limits<float>::quiet_NaN());
    }
    EXPECT_EQ(argmaxOf(row), row.argmax().item<int64_t>()) << trial;
  }
  const auto ties = torch::tensor({1.0f, 3.0f, 3.0f, -2.0f});
  EXPECT_EQ(argmaxOf(ties), 1);
  const auto wide = torch::randn({8, 64});
  EXPECT_EQ(argmaxOf(wide.select(1, 3)), wide.select(1, 3).argmax().item<int64_t>());  // strided
  const auto doubles = torch::randn({300}, torch::kFloat64);
  EXPECT_EQ(argmaxOf(doubles), doubles.argmax().item<int64_t>());
}

}  // namespace
}  // namespace kvscope
