// The memory read bound of the benchmark (core/bench/read_bound.h): one timed
// pass per trial over the bytes asked for, a rate from the median, and a clear
// refusal of nothing to read.
#include <gtest/gtest.h>

#include <cmath>

#include "core/bench/read_bound.h"
#include "core/error.h"

namespace kvscope {
namespace {

TEST(ReadBound, TimesOnePassPerTrialAndGivesTheRate) {
  TrialPlan plan;
  plan.warmup = 1;
  plan.trials = 5;
  const int64_t bytes = (1 << 20) + 12;  // not a whole number of vectors: the tail is read too
  const ReadBound bound = measureReadBound(bytes, plan);
  ASSERT_EQ(bound.pass.samples_ms.size(), 5u);
  EXPECT_GT(bound.pass.median_ms, 0.0);
  EXPECT_LE(bound.pass.min_ms, bound.pass.median_ms);
  EXPECT_TRUE(std::isfinite(bound.gb_per_s));
  EXPECT_NEAR(bound.gb_per_s, static_cast<double>(bytes) / 1e9 / (bound.pass.median_ms / 1000.0), 1e-9 * bound.gb_per_s);
}

TEST(ReadBound, NothingToReadIsRefused) {
  EXPECT_THROW(measureReadBound(0, TrialPlan{}), Error);
  EXPECT_THROW(measureReadBound(-5, TrialPlan{}), Error);
}

}  // namespace
}  // namespace kvscope
