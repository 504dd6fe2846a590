// kvscope-cli run's measured speedup, end to end: the line is printed without
// --json, a run of few new tokens says it is too short to measure instead of
// giving a number, and --json carries every trial (the speculative session
// and the same session without its drafter, timed in pairs) with the median
// and the verdict they give. Timings are never compared with a threshold
// here: only what the output says about them, and that it adds up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

const std::string kLine = "measured speedup over autoregressive decoding: ";

std::vector<std::string> runArgs(int64_t max_new, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                                   "--prompt", "Once upon a time", "--greedy", "--ignore-eos", "--gamma", "3",
                                   "--max-new", std::to_string(max_new)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The lines of stdout that start with the speedup line's label, without it.
std::vector<std::string> speedupLines(const CliResult& r) {
  std::vector<std::string> values;
  for (const std::string& line : r.stdoutLines()) {
    if (line.rfind(kLine, 0) == 0) values.push_back(line.substr(kLine.size()));
  }
  return values;
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

TEST(CliRunSpeedup, TheLineIsPrintedWithoutJson) {
  const CliResult r = runCli(runArgs(48, {}));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const auto values = speedupLines(r);
  ASSERT_EQ(values.size(), 1u) << r.describe();
  // 48 tokens are enough to time: a number with how it was measured, or, when
  // this shared machine's noise swamps the effect, that verdict (never the
  // too-few-tokens one).
  const std::string& v = values.front();
  const bool number = v.find(" (median of 5 trials, ") != std::string::npos &&
                      v.find("both sessions recording the same way, after 1 warm-up pair)") != std::string::npos &&
                      std::isdigit(static_cast<unsigned char>(v.front()));
  const bool noisy = v.rfind("too short to measure (the 5 trials range over ", 0) == 0 &&
                     v.find("the noise is larger than the effect") != std::string::npos;
  EXPECT_TRUE(number || noisy) << v;
  EXPECT_EQ(v.find("new tokens, fewer than"), std::string::npos) << v;
  EXPECT_FALSE(r.lastJson().is_object()) << "no JSON without --json\n" << r.describe();
}

TEST(CliRunSpeedup, AShortRunSaysItIsTooShort) {
  const CliResult r = runCli(runArgs(8, {}));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const auto values = speedupLines(r);
  ASSERT_EQ(values.size(), 1u) << r.describe();
  EXPECT_EQ(values.front().rfind("too short to measure (8 new tokens, fewer than the 32 needed; the 5 trials gave ", 0), 0u)
      << values.front();

  const auto j = runJson(runArgs(8, {"--json", "--speedup-trials", "2"}));
  ASSERT_TRUE(j.contains("speedup")) << j.dump();
  EXPECT_FALSE(j["speedup"]["measurable"].get<bool>());
  EXPECT_EQ(j["speedup"]["new_tokens"].get<int64_t>(), 8);
  EXPECT_NE(j["speedup"]["too_short_because"].get<std::string>().find("fewer than the 32 needed"), std::string::npos);
}

TEST(CliRunSpeedup, JsonCarriesTheTrials) {
  const int64_t n = 40;
  const auto j = runJson(runArgs(n, {"--json", "--speedup-trials", "3"}));
  ASSERT_TRUE(j.contains("speedup")) << j.dump();
  const auto& s = j["speedup"];
  ASSERT_EQ(s["trials"].size(), 3u) << s.dump();
  EXPECT_EQ(s["warmup"].get<int>(), 1);
  EXPECT_EQ(s["new_tokens"].get<int64_t>(), n);
  std::vector<double> speedups, plain_ms;
  for (const auto& t : s["trials"]) {
    // Greedy with --ignore-eos: both sessions make every token asked for.
    EXPECT_EQ(t["speculative_tokens"].get<int64_t>(), n) << t.dump();
    EXPECT_EQ(t["plain_tokens"].get<int64_t>(), n) << t.dump();
    const double spec = t["speculative_ms"].get<double>(), plain = t["plain_ms"].get<double>();
    ASSERT_GT(spec, 0.0);
    ASSERT_GT(plain, 0.0);
    // Equal token counts: the tokens/s ratio is the time ratio.
    EXPECT_NEAR(t["speedup"].get<double>(), plain / spec, 1e-9 * plain / spec) << t.dump();
    speedups.push_back(t["speedup"].get<double>());
    plain_ms.push_back(plain);
  }
  const double median = medianOf(speedups);
  EXPECT_DOUBLE_EQ(s["median"].get<double>(), median);
  EXPECT_DOUBLE_EQ(s["min"].get<double>(), *std::min_element(speedups.begin(), speedups.end()));
  EXPECT_DOUBLE_EQ(s["max"].get<double>(), *std::max_element(speedups.begin(), speedups.end()));
  EXPECT_DOUBLE_EQ(j["measured_speedup"].get<double>(), median);
  EXPECT_DOUBLE_EQ(j["baseline_ms"].get<double>(), medianOf(plain_ms));
  // The verdict follows from the trials: measurable unless they spread wider
  // than the median differs from 1.
  const bool noisy = s["max"].get<double>() - s["min"].get<double>() > std::abs(median - 1.0);
  EXPECT_EQ(s["measurable"].get<bool>(), !noisy) << s.dump();
  EXPECT_EQ(s["too_short_because"].is_null(), !noisy) << s.dump();
}

TEST(CliRunSpeedup, NoBaselineMeasuresNothingAndOneTrialIsRefused) {
  const CliResult quiet = runCli(runArgs(8, {"--no-baseline"}));
  ASSERT_TRUE(quiet.exited && quiet.exit_code == 0) << quiet.describe();
  EXPECT_TRUE(speedupLines(quiet).empty()) << quiet.describe();
  const auto j = runJson(runArgs(8, {"--no-baseline", "--json"}));
  EXPECT_FALSE(j.contains("speedup"));
  EXPECT_FALSE(j.contains("measured_speedup"));

  const CliResult one = runCli(runArgs(8, {"--speedup-trials", "1"}));
  EXPECT_TRUE(one.exited) << one.describe();
  EXPECT_EQ(one.exit_code, 2) << one.describe();
  EXPECT_NE(one.err.find("--speedup-trials must be 2-1000"), std::string::npos) << one.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
