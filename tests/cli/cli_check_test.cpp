// kvscope-cli run --capture, then check, on every fault of the bug zoo: the
// capture is the format any engine writes, so check knows nothing of the
// fault, yet its root cause must be the cache and round diff names (window
// faults on the sliding-window fixture). Without a fault it exits 0.
#include <cstdint>
#include <fstream>

#include "tests/cli/cli_test_support.h"

namespace kvscope::cli_test {
namespace {

struct Setup {
  std::vector<std::string> models;
};

Setup setupFor(const std::string& fault) {
  if (fault == "window-roll-early") return {{"--target", modelDir("mistral-sw-tiny"), "--ngram", "2"}};
  return {{"--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft")}};
}

std::vector<std::string> runArgs(const std::string& command, const std::string& fault, int64_t gamma) {
  std::vector<std::string> args{command};
  const Setup setup = setupFor(fault);
  args.insert(args.end(), setup.models.begin(), setup.models.end());
  args.insert(args.end(), {"--prompt", "Once upon a time", "--gamma", std::to_string(gamma), "--max-new", "32",
                           "--ignore-eos", "--fault", fault, "--json"});
  return args;
}

class CheckOnTheBugZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckOnTheBugZoo, RootCauseIsTheCacheAndRoundDiffNames) {
  const std::string fault = GetParam();
  ScratchDir scratch("check-" + fault);
  const std::string capture = scratch.file("run.kvcapture");
  // Some faults act only in some rounds (bonus-not-fed after a fully accepted one): try a few gammas.
  for (const int64_t gamma : {4, 2, 1}) {
    const CliResult diff_run = runCli(runArgs("diff", fault, gamma));
    const auto diff = diff_run.lastJson();
    ASSERT_TRUE(diff.is_object()) << diff_run.describe();
    if (diff["root_cause"].is_null() && gamma > 1) continue;
    auto run = runArgs("run", fault, gamma);
    run.insert(run.end(), {"--capture", capture, "--no-baseline"});
    const CliResult written = runCli(run);
    ASSERT_EQ(written.exit_code, 0) << written.describe();
    const CliResult check = runCli({"check", capture, "--json"});
    const auto j = check.lastJson();
    ASSERT_TRUE(j.is_object()) << check.describe();
    if (diff["root_cause"].is_null()) {
      EXPECT_EQ(check.exit_code, 0) << "diff finds nothing, check does: " << j.dump();
      return;
    }
    ASSERT_EQ(check.exit_code, 1) << check.describe();
    ASSERT_TRUE(j["root_cause"].is_object()) << j.dump();
    const auto& want = diff["root_cause"];
    const auto& got = j["root_cause"];
    EXPECT_EQ(got["role"], want["cache"]) << got["what"] << "\ndiff: " << want.dump();
    const auto [round, phase] = sessionMoment(manifestOf(capture), got);
    EXPECT_EQ(round, want["round"].get<int64_t>()) << got["what"] << "\ndiff: " << want.dump();
    EXPECT_EQ(phase, want["phase"].get<std::string>()) << got["what"] << "\ndiff: " << want.dump();
    return;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, CheckOnTheBugZoo,
                         ::testing::Values("none", "no-prune", "prune-short", "prune-long-no-refeed",
                                           "reset-not-rollback", "crop-zero-noop", "stale-rope", "partial-layer-crop",
                                           "full-prefix-with-cache", "drafter-not-pruned", "half-cache",
                                           "bonus-not-fed", "verify-mask-leak", "append-reversed",
                                           "window-roll-early"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(CheckCli, ACheckpointThatIsNotTheCapturedOneExits2BeforeRunning) {
  ScratchDir scratch("check-mismatch");
  const std::string capture = scratch.file("run.kvcapture");
  auto run = runArgs("run", "none", 4);
  run.insert(run.end(), {"--capture", capture, "--no-baseline"});
  ASSERT_EQ(runCli(run).exit_code, 0);
  const CliResult r = runCli({"check", capture, "--target", modelDir("qwen2-tiny")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("is not the target this capture ran"), std::string::npos) << r.describe();
}

TEST(CheckCli, AnEvictionPolicyCannotBeWrittenAsACapture) {
  ScratchDir scratch("check-evict");
  auto run = runArgs("run", "none", 4);
  run.insert(run.end(), {"--capture", scratch.file("run.kvcapture"), "--no-baseline", "--evict", "h2o:0.5"});
  const CliResult r = runCli(run);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("eviction policy"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
