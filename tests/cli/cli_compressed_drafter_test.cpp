// kvscope-cli run --drafter-compressed POLICY:BUDGET end to end:
// the target drafts for itself over its compressed cache and the output is
// the target's greedy output (compared with `generate`), for the compacted,
// masked and re-rotated layouts; alpha, tokens/s and the speedup are
// reported; sampling, Session-only options, every=N, a bad spec and
// re-rotation on GPT-2 are refused with the option named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

const std::string kDraftIds = "5,17,300,42,8,99,250,13,64,7,11,400,23,5,77,120,9,31,2,18,44,61,3,90";

std::vector<std::string> selfDraft(const std::string& fixture, const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run", "--target", modelDir(fixture), "--prompt-ids", kDraftIds,
                                "--max-new", "16", "--gamma", "3", "--ignore-eos"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json greedyIds(const std::string& fixture) {
  return runJson({"generate", "--model", modelDir(fixture), "--prompt-ids", kDraftIds, "--max-new", "16",
                  "--ignore-eos", "--greedy", "--json"})["ids"];
}

TEST(CliCompressedDrafter, OutputIsTheTargetsGreedyOutputForEveryLayout) {
  const auto expected = greedyIds("llama-tiny");
  ASSERT_EQ(expected.size(), 16u);
  for (const char* layout : {"compacted", "masked", "rerotated"}) {
    const auto j = runJson(selfDraft("llama-tiny", {"--drafter-compressed", "h2o:0.25", "--draft-cache", layout, "--json"}));
    EXPECT_EQ(j["ids"], expected) << layout;
    EXPECT_EQ(j["matches_target_greedy"], true) << layout;
    EXPECT_EQ(j["draft_cache"], layout);
    EXPECT_EQ(j["drafter_compressed"], "h2o:0.25");
    EXPECT_GE(j["alpha"].get<double>(), 0.0);
    EXPECT_LE(j["alpha"].get<double>(), 1.0);
    EXPECT_LE(j["accepted"].get<int64_t>(), j["drafted"].get<int64_t>());
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0.0);
    EXPECT_GT(j["measured_speedup"].get<double>(), 0.0);
    EXPECT_EQ(j["full_rows"], 23);  // the prefill: every prompt token but the last
    // round(0.25 * 23) = 6 rows compacted; the mask keeps all 23 in storage.
    EXPECT_EQ(j["draft_rows"], std::string(layout) == "masked" ? 23 : 6) << layout;
  }
}

TEST(CliCompressedDrafter, Gpt2AndTheTextReport) {
  const auto j = runJson(selfDraft("gpt2-tiny", {"--drafter-compressed", "streaming:8:sinks=2", "--json"}));
  EXPECT_EQ(j["ids"], greedyIds("gpt2-tiny"));
  EXPECT_EQ(j["draft_rows"], 8);
  const CliResult full = runCli(selfDraft("gpt2-tiny", {"--drafter-compressed", "streaming:8:sinks=2"}));  // the text report
  EXPECT_TRUE(full.exited && full.exit_code == 0) << full.describe();
  for (const char* text : {"alpha (accepted / drafted)", "tokens/s", "measured speedup over autoregressive decoding",
                           "equals the target's greedy output", "streaming:8"}) {
    EXPECT_NE(full.out.find(text), std::string::npos) << text << "\n" << full.describe();
  }
}

void expectRefused(const std::string& fixture, const std::vector<std::string>& extra, const std::string& message) {
  const CliResult r = runCli(selfDraft(fixture, extra));
  EXPECT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find(message), std::string::npos) << r.describe();
}

TEST(CliCompressedDrafter, RefusesWhatItCannotDo) {
  const std::vector<std::string> h2o{"--drafter-compressed", "h2o:0.5"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), h2o.begin(), h2o.end());
    return more;
  };
  expectRefused("llama-tiny", with({"--temperature", "0.8"}), "--drafter-compressed is greedy only");
  expectRefused("llama-tiny", with({"--drafter", modelDir("llama-tiny-draft")}), "--drafter is not available with --drafter-compressed");
  expectRefused("llama-tiny", with({"--evict", "h2o:0.5"}), "--evict is not available with --drafter-compressed");
  expectRefused("llama-tiny", with({"--trace", "x.kvtrace"}), "--trace is not available");
  expectRefused("llama-tiny", with({"--draft-cache", "sparse"}), "--draft-cache must be one of masked, compacted, rerotated");
  expectRefused("llama-tiny", {"--drafter-compressed", "h2o:0.5:every=2"}, "every=N is --evict's");
  expectRefused("llama-tiny", {"--drafter-compressed", "lru:0.5"}, "--drafter-compressed must be POLICY:BUDGET");
  expectRefused("llama-tiny", {"--drafter-compressed", "h2o:1.5"}, "--drafter-compressed must be POLICY:BUDGET");
  expectRefused("llama-tiny", {"--draft-cache", "compacted"}, "--draft-cache is for --drafter-compressed");
  expectRefused("gpt2-tiny", with({"--draft-cache", "rerotated"}), "learns absolute positions");
}

}  // namespace
}  // namespace kvscope::cli_test
