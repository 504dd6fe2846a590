// --weights stored|fp32 end to end (core/model/weight_residency.h): the
// bundled models are stored as bfloat16; kept so (the default) or widened at
// load, they give the same tokens and the same logits, and bench reports
// which residency it measured and the bytes by dtype.
#include <gtest/gtest.h>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

TEST(CliWeights, StoredAndFp32GiveTheSameLogitsAndTokens) {
  const std::vector<std::string> logits = {"logits", "--ids", "5,17,300,2,44,901,7", "--mode", "prefill_then_step",
                                           "--json"};  // every logit of the last position
  auto with = [](std::vector<std::string> args, const std::string& weights) {
    args.insert(args.end(), {"--weights", weights});
    return args;
  };
  const CliResult stored = runCli(with(logits, "stored")), widened = runCli(with(logits, "fp32"));
  ASSERT_EQ(stored.exit_code, 0) << stored.describe();
  ASSERT_EQ(widened.exit_code, 0) << widened.describe();
  EXPECT_EQ(stored.out, widened.out) << "the logits differ between the residencies";
  EXPECT_EQ(runCli(logits).out, stored.out) << "stored is the default";

  const std::vector<std::string> generate = {"generate", "--prompt", "And the LORD spake unto Moses, saying,",
                                             "--max-new", "16", "--greedy", "--json"};
  const auto a = runJson(with(generate, "stored")), b = runJson(with(generate, "fp32"));
  EXPECT_EQ(a["ids"], b["ids"]);
}

TEST(CliWeights, BenchReportsTheResidencyAndItsBytes) {
  const std::vector<std::string> quick = {"bench", "--quick", "--drafter", "none", "--trials", "1", "--warmup", "0",
                                          "--new-tokens", "4", "--json"};
  auto stored_args = quick, fp32_args = quick;
  fp32_args.insert(fp32_args.end(), {"--weights", "fp32"});
  const auto stored = runJson(stored_args)["target"]["weights"], widened = runJson(fp32_args)["target"]["weights"];
  EXPECT_EQ(stored["residency"], "stored");
  EXPECT_EQ(widened["residency"], "fp32");
  EXPECT_TRUE(stored["resident_mb_by_dtype"].contains("BFloat16")) << stored.dump();
  EXPECT_FALSE(widened["resident_mb_by_dtype"].contains("BFloat16")) << widened.dump();
  EXPECT_LT(stored["resident_mb"].get<double>(), 0.6 * widened["resident_mb"].get<double>());
}

// check loads the capture's models either way; the bundled pair's reference
// forward is the same, so a clean capture checks clean with both.
TEST(CliWeights, CheckTakesTheOption) {
  ScratchDir scratch("weights-check");
  const std::string capture = scratch.file("run.kvcapture");
  const CliResult written = runCli({"run", "--prompt", "And the LORD spake unto Moses, saying,", "--max-new", "12",
                                    "--greedy", "--capture", capture, "--no-baseline"});
  ASSERT_EQ(written.exit_code, 0) << written.describe();
  for (const std::string weights : {"stored", "fp32"}) {
    const CliResult check = runCli({"check", capture, "--weights", weights, "--json"});
    EXPECT_EQ(check.exit_code, 0) << weights << ": " << check.describe();
    EXPECT_EQ(check.lastJson()["ok"], true) << weights << ": " << check.describe();
  }
  const CliResult bad = runCli({"check", capture, "--weights", "half"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--weights"), std::string::npos) << bad.describe();
}

TEST(CliWeights, ABadValueIsNamed) {
  const CliResult r = runCli({"generate", "--prompt-ids", "1,2", "--max-new", "1", "--weights", "bf16"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--weights"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("'bf16'"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
