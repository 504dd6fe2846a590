// argmaxOf (core/decode/sampling.h), the drafter's greedy pick, and
// argmaxOfRow, the greedy verify's, against
// torch's argmax: random rows, ties (the first wins), NaN (the first NaN
// wins), and rows its plain loop does not read (a strided view, float64),
// which go to torch. softmaxOfPicks, the greedy picks' probabilities,
// against torch's softmax.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// A row of a matrix read in place: a greedy verify's choices, row by row.
TEST(ArgmaxOf, RowOfAMatrixIsTorchsArgmaxOfThatRow) {
  torch::manual_seed(6);
  auto rows = torch::randn({5, 2048});  // [rows, vocab]
  rows[1] = rows[1].round();                                        // ties
  rows[3][700] = std::numeric_limits<float>::quiet_NaN();           // NaN wins
  const auto want = rows.argmax(1);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(argmaxOfRow(rows, i), want[i].item<int64_t>()) << i;
  const auto strided = torch::randn({64, 3}).t();  // [3, 64], not contiguous: torch's argmax
  EXPECT_EQ(argmaxOfRow(strided, 2), strided[2].argmax().item<int64_t>());
  const auto doubles = torch::randn({2, 40}, torch::kFloat64);
  EXPECT_EQ(argmaxOfRow(doubles, 1), doubles[1].argmax().item<int64_t>());
  EXPECT_THROW(argmaxOfRow(rows, 5), std::exception);   // past the last row
  EXPECT_THROW(argmaxOfRow(rows, -1), std::exception);
  EXPECT_THROW(argmaxOfRow(torch::randn({8}), 0), std::exception);  // not a matrix
}

TEST(SoftmaxOfPicks, IsTorchsSoftmaxAtThePicks) {
  torch::manual_seed(5);
  for (int64_t vocab : {1, 7, 16, 33, 2048, 151936}) {
    const auto logits = torch::randn({5, vocab}) * 6.0;  // [rows, vocab], a few rows sharply peaked
    std::vector<int64_t> picks;
    for (int64_t i = 0; i < 4; ++i) picks.push_back((i * 7919 + 3) % vocab);
    picks[1] = logits[1].argmax().item<int64_t>();  // the likeliest: a large probability
    // torch's float32 softmax, and the truth: the float64 softmax of the same logits.
    const auto expected = logits.narrow(0, 0, 4).softmax(1).to(torch::kFloat64);
    const auto exact = logits.narrow(0, 0, 4).to(torch::kFloat64).softmax(1);
    const std::vector<double> got = softmaxOfPicks(logits, picks);  // reads rows 0..3 of 5
    ASSERT_EQ(got.size(), picks.size());
    for (size_t i = 0; i < picks.size(); ++i) {
      const double want = expected[static_cast<int64_t>(i)][picks[i]].item<double>();
      const double truth = exact[static_cast<int64_t>(i)][picks[i]].item<double>();
      EXPECT_NEAR(got[i] / truth, 1.0, 1e-6) << "vocab " << vocab << " row " << i;  // float32 exp, float64 sum
      EXPECT_NEAR(got[i] / want, 1.0, 5e-5) << "vocab " << vocab << " row " << i;   // torch's float32 sum drifts by 1e-5 at 152k
    }
  }
  EXPECT_TRUE(softmaxOfPicks(torch::randn({2, 8}), {}).empty());
}

TEST(SoftmaxOfPicks, NonFiniteAndUnusualRowsFollowTorch) {
  auto logits = torch::randn({3, 40});
  logits[0][5] = std::numeric_limits<float>::quiet_NaN();
  logits[1][9] = std::numeric_limits<float>::infinity();
  const auto got = softmaxOfPicks(logits, {5, 9, 2});
  const auto want = logits.softmax(1);
  EXPECT_TRUE(std::isnan(got[0]));                                 // NaN spreads, as in torch
  EXPECT_EQ(std::isnan(got[1]), std::isnan(want[1][9].item<double>()));  // inf - inf: torch's answer
  EXPECT_EQ(std::isnan(got[2]), std::isnan(want[2][2].item<double>()));
  const auto doubles = torch::randn({2, 30}, torch::kFloat64);
  const auto from_doubles = softmaxOfPicks(doubles, {3, 4});
  EXPECT_NEAR(from_doubles[1], doubles.softmax(1)[1][4].item<double>(), 1e-12);
  const auto strided = torch::randn({30, 2}).t();  // [2, 30], not contiguous
  EXPECT_NEAR(softmaxOfPicks(strided, {1, 2})[1], strided.softmax(1)[1][2].item<double>(), 1e-7);
  EXPECT_THROW(softmaxOfPicks(torch::randn({2, 30}), {0, 30}), std::exception);  // a pick outside the row
}

}  // namespace
}  // namespace kvscope
