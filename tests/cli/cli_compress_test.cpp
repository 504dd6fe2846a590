// kvscope-cli compress end to end: the JSON docs/compression-lab.md describes
// (kept positions per layer and kv head, KL, top-1, attention mass, bytes,
// steps) with --json, budget 1.0 giving KL 0, the text report without it, element pruning, the
// sweep table, and named errors for bad parameters (never a crash).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

// 20 tokens: a prefill of 19 rows, then the last token is the first step.
const std::string kIds = "5,17,300,42,8,99,250,13,64,7,11,400,23,5,77,120,9,31,2,18";

std::vector<std::string> compress(std::vector<std::string> extra) {
  std::vector<std::string> args{"compress", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(CliCompress, JsonHasTheKeptRowsAndTheMetrics) {
  const auto j = runJson(compress({"--policy", "h2o", "--budget", "0.5", "--max-new", "4", "--json"}));
  for (const char* key : {"kept", "kl_mean", "kl_max", "top1_agreement", "attention_mass", "bytes_full",
                          "bytes_kept", "steps", "removed", "attention_output_error", "perplexity_full"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  // llama-tiny: 2 layers, 2 kv heads; round(0.5 * 19) = 10 rows kept per kv head.
  ASSERT_EQ(j["kept"].size(), 2u);
  for (const auto& layer : j["kept"]) {
    ASSERT_EQ(layer.size(), 2u);
    for (const auto& head : layer) EXPECT_EQ(head.size(), 10u);
  }
  EXPECT_EQ(j["removed"].size(), 2u * 2u * 9u);
  // Per layer and kv head, kept and removed split the 19 prefill positions,
  // and h2o's window (half the budget: 5 rows) is among the kept.
  for (size_t l = 0; l < 2; ++l) {
    for (size_t h = 0; h < 2; ++h) {
      std::set<int64_t> positions;
      for (const auto& p : j["kept"][l][h]) positions.insert(p.get<int64_t>());
      for (int64_t p = 14; p < 19; ++p) {
        EXPECT_EQ(positions.count(p), 1u) << "layer " << l << " head " << h << " position " << p;
      }
      for (const auto& row : j["removed"]) {
        if (row["layer"] != l || row["kv_head"] != h) continue;
        EXPECT_TRUE(positions.insert(row["position"].get<int64_t>()).second) << "kept and removed: " << row.dump();
      }
      EXPECT_EQ(positions.size(), 19u) << "layer " << l << " head " << h;
    }
  }
  EXPECT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["bytes_kept"].get<int64_t>() * 19, j["bytes_full"].get<int64_t>() * 10);
  // Half the rows gone: the distribution moves and the kept rows miss some attention.
  EXPECT_GT(j["kl_mean"].get<double>(), 0.0);
  EXPECT_GE(j["kl_max"].get<double>(), j["kl_mean"].get<double>());
  EXPECT_LT(j["attention_mass"].get<double>(), 1.0);
  EXPECT_GT(j["attention_mass"].get<double>(), 0.0);
  EXPECT_EQ(j["attention_output_error"].size(), 2u);
  ASSERT_EQ(j["scores"].size(), 2u);
  EXPECT_EQ(j["scores"][1][0].size(), 19u);
}

TEST(CliCompress, BudgetOneGivesKlZero) {
  for (const char* policy : {"streaming", "h2o", "snapkv", "tova", "knorm", "random", "pyramid"}) {
    const auto j = runJson(compress({"--policy", policy, "--budget", "1", "--max-new", "3", "--json"}));
    EXPECT_EQ(j["kl_max"].get<double>(), 0.0) << policy;
    EXPECT_EQ(j["top1_agreement"].get<double>(), 1.0) << policy;
    EXPECT_EQ(j["bytes_kept"], j["bytes_full"]) << policy;
  }
}

TEST(CliCompress, TextReportWithoutJsonTheJsonWithIt) {
  const std::vector<std::string> args =
      compress({"--policy", "snapkv", "--budget-rows", "6", "--window", "4", "--continuation-ids", "3,4,5"});
  const CliResult full = runCli(args);
  ASSERT_EQ(full.exit_code, 0) << full.describe();
  EXPECT_NE(full.out.find("snapkv budget 6 rows"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("KL mean"), std::string::npos);
  EXPECT_FALSE(full.lastJson().is_object()) << "no JSON without --json\n" << full.out;
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const auto j = runJson(with_json);
  EXPECT_EQ(j["steps"].size(), 4u);  // the last prompt token, then 3 teacher-forced tokens
  EXPECT_EQ(j["kept"][0][0].size(), 6u);
}

TEST(CliCompress, DemoteInsteadOfEvict) {
  const auto j = runJson(compress({"--policy", "h2o", "--budget", "0.5", "--demote", "8", "--max-new", "2", "--json"}));
  EXPECT_EQ(j["demoted"], 2 * 2 * 9);
  EXPECT_GT(j["demote_max_error"].get<double>(), 0.0);
  EXPECT_EQ(j["attention_mass"].get<double>(), 1.0);
  for (const auto& layer : j["kept"]) {
    for (const auto& head : layer) EXPECT_EQ(head.size(), 19u);  // every row still attended to
  }
}

TEST(CliCompress, ElementPruning) {
  const auto j = runJson(compress({"--element", "per-channel", "--k-sparsity", "0.5", "--v-sparsity", "0.7",
                                   "--score", "output-aware", "--dense-window", "4", "--max-new", "2", "--json"}));
  EXPECT_GT(j["pruned_k"].get<int64_t>(), 0);
  EXPECT_GT(j["pruned_v"].get<int64_t>(), j["pruned_k"].get<int64_t>());
  EXPECT_LT(j["bytes_kept"].get<int64_t>(), j["bytes_full"].get<int64_t>());
}

TEST(CliCompress, SweepHasEveryPolicyAndPruningSetting) {
  const std::vector<std::string> sweep = {"compress", "--sweep", "--model", modelDir("llama-tiny"),
                                          "--prompt-ids", kIds, "--max-new", "2"};
  std::vector<std::string> sweep_json = sweep;
  sweep_json.push_back("--json");
  const auto j = runJson(sweep_json);
  const CliResult full = runCli(sweep);  // the tables
  ASSERT_EQ(full.exit_code, 0) << full.describe();
  EXPECT_EQ(j["eviction"].size(), 7u * 3u);
  EXPECT_EQ(j["pruning"].size(), 8u);
  // Self-speculation: the target with its full cache, then every policy at 25 and 50% (no bundled
  // drafter next to a --model target); every row reproduced the target's greedy output.
  ASSERT_EQ(j["self_speculation"].size(), 1u + 7u * 2u);
  EXPECT_EQ(j["self_speculation"][0]["alpha"].get<double>(), 1.0);
  for (const auto& row : j["self_speculation"]) EXPECT_EQ(row["tokens"], j["self_speculation"][0]["tokens"]);
  EXPECT_NE(full.out.find("| pyramid budget 75%"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("| per-channel output-aware 70%"), std::string::npos) << full.out;
}

TEST(CliCompress, GammaAddsSelfSpeculation) {
  const auto args = compress({"--policy", "streaming", "--budget", "0.25", "--max-new", "6", "--gamma", "3"});
  auto with_json = args;
  with_json.push_back("--json");
  const auto j = runJson(with_json);
  const CliResult full = runCli(args);
  ASSERT_EQ(full.exit_code, 0) << full.describe();
  ASSERT_TRUE(j["self_speculation"].is_object());
  EXPECT_EQ(j["self_speculation"]["tokens"].size(), 6u);
  EXPECT_LE(j["self_speculation"]["accepted"].get<int64_t>(), j["self_speculation"]["drafted"].get<int64_t>());
  EXPECT_NE(full.out.find("| target, streaming budget 25%"), std::string::npos) << full.out;
  const CliResult bad = runCli(compress({"--policy", "h2o", "--gamma", "0"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--gamma must be in [1, 64]"), std::string::npos) << bad.describe();
}

void expectError(const std::vector<std::string>& extra, const std::string& message) {
  const CliResult r = runCli(compress(extra));
  EXPECT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find(message), std::string::npos) << r.describe();
}

TEST(CliCompress, BadParametersNameTheOptionAndTheRange) {
  expectError({"--policy", "h2o", "--budget", "1.5"}, "--budget must be a fraction of the rows in (0, 1]");
  expectError({"--policy", "h2o", "--budget", "0"}, "--budget must be a fraction of the rows in (0, 1]");
  expectError({"--policy", "lru"}, "--policy must be one of streaming, h2o, snapkv, tova, knorm, random, pyramid");
  expectError({"--policy", "snapkv", "--kernel", "4"}, "--kernel must be odd and >= 1");
  expectError({"--policy", "h2o", "--window", "0"}, "--window must be >= 1");
  expectError({"--policy", "h2o", "--budget-rows", "0"}, "--budget-rows must be >= 1");
  expectError({"--policy", "random", "--seed", "-1"}, "--seed must be >= 0");
  expectError({"--element", "per-row"}, "--element must be per-token or per-channel");
  expectError({"--element", "per-token", "--k-sparsity", "1.2"}, "--k-sparsity must be in [0, 1)");
  expectError({"--element", "per-token", "--score", "gradient"}, "--score must be magnitude or output-aware");
  expectError({"--element", "per-token", "--dense-window", "-1"}, "--dense-window must be >= 0");
  expectError({"--policy", "h2o", "--demote", "2"}, "--demote must be 8 or 4");
  // Options the policy does not read are refused, not ignored.
  expectError({"--policy", "h2o", "--sinks", "2"}, "--sinks is for --policy streaming, not --policy h2o");
  expectError({"--policy", "streaming", "--kernel", "3"}, "--kernel is for --policy snapkv and pyramid, not --policy streaming");
  expectError({"--policy", "knorm", "--seed", "3"}, "--seed is for --policy random, not --policy knorm");
  expectError({"--policy", "tova", "--window", "4"}, "--window is for --policy h2o, snapkv and pyramid");
  expectError({"--element", "per-token", "--window", "4"}, "--window is for --score output-aware");
  expectError({"--policy", "snapkv", "--window", "30"}, "--window must be in [1, 19] (the queries of the prefill)");
  expectError({"--budget", "0.5"}, "need --policy");
  expectError({}, "give --policy NAME");
  expectError({"--policy", "h2o", "--max-new", "-2"}, "--max-new must be >= 0");
  expectError({"--policy", "h2o", "--continuation-ids", "5,9999"}, "token id 9999 out of range [0, 511]");
}

TEST(CliCompress, EvictionOnASlidingWindowModelIsRefused) {
  const CliResult r = runCli({"compress", "--model", modelDir("mistral-sw-tiny"), "--prompt-ids", kIds, "--policy",
                              "h2o", "--budget", "0.5"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("sliding-window"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
