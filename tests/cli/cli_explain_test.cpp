// kvscope-cli explain end to end: the JSON object docs/teaching.md
// describes, its shapes, weights summing to 1, the text form, the what-if
// options, and named errors for a bad layer, head, position or edit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

const std::string kIds = "5,17,300,42,8,99,250,13,64,7";  // 10 tokens

double sum(const nlohmann::json& values) {
  double total = 0;
  for (const auto& v : values) total += v.get<double>();
  return total;
}

void expectMatrix(const nlohmann::json& m, size_t rows, size_t cols, const std::string& name) {
  ASSERT_TRUE(m.is_array()) << name;
  ASSERT_EQ(m.size(), rows) << name;
  for (const auto& row : m) EXPECT_EQ(row.size(), cols) << name;
}

TEST(CliExplain, JsonHasEveryStepWithItsShape) {
  // llama-tiny: 4 query heads over 2 kv heads, head_dim 16.
  const auto j = runJson({"explain", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds, "--layer", "1",
                          "--head", "3", "--position", "7", "--json"});
  for (const char* key : {"q", "k", "v", "scores", "scaled", "weights", "output", "kv_head"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["q"].size(), 16u);
  EXPECT_EQ(j["q_before_rope"].size(), 16u);
  expectMatrix(j["k"], 8, 16, "k");
  expectMatrix(j["v"], 8, 16, "v");
  for (const char* key : {"scores", "scaled", "weights", "masked", "visible"}) EXPECT_EQ(j[key].size(), 8u) << key;
  EXPECT_EQ(j["output"].size(), 16u);
  EXPECT_NEAR(sum(j["weights"]), 1.0, 1e-5);
  EXPECT_EQ(j["kv_head"], 1);
  EXPECT_EQ(j["query_heads_sharing"], (std::vector<int>{2, 3}));
  EXPECT_NEAR(j["scale"].get<double>(), 0.25, 1e-12);
  ASSERT_TRUE(j["rotary"].is_object());
  EXPECT_EQ(j["rotary"]["angle"].size(), 8u);
  EXPECT_LE(j["model_difference"].get<double>(), 1e-5);
  expectMatrix(j["element_scores"]["k"], 8, 16, "element_scores.k");
  EXPECT_TRUE(j["what_if"].is_null());
  // scaled = scores x scale, key by key.
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(j["scaled"][i].get<double>(), 0.25 * j["scores"][i].get<double>(), 1e-5);
  }
}

// Through o_proj: each head's share, summed over the heads plus the bias, is
// the layer's attention output after o_proj (GPT-2's c_proj has a bias).
TEST(CliExplain, HeadSharesThroughOProjSumToTheLayersAttentionOutput) {
  std::vector<double> total(64, 0.0);
  nlohmann::json after;
  for (int head = 0; head < 4; ++head) {
    const auto j = runJson({"explain", "--model", modelDir("gpt2-tiny"), "--prompt-ids", kIds, "--layer", "1",
                            "--head", std::to_string(head), "--position", "6", "--json"});
    ASSERT_EQ(j["o_proj_head_contribution"].size(), 64u);
    ASSERT_EQ(j["o_proj_bias"].size(), 64u);
    ASSERT_EQ(j["attention_output_after_o_proj"].size(), 64u);
    EXPECT_LE(j["o_proj_difference"].get<double>(), 1e-5);
    EXPECT_EQ(j["output"].size(), 16u);  // the existing keys stay
    for (size_t i = 0; i < 64; ++i) {
      total[i] += j["o_proj_head_contribution"][i].get<double>() + (head == 0 ? j["o_proj_bias"][i].get<double>() : 0);
    }
    if (head > 0) EXPECT_EQ(j["attention_output_after_o_proj"], after) << "head " << head;
    after = j["attention_output_after_o_proj"];
  }
  double worst = 0;
  for (size_t i = 0; i < 64; ++i) worst = std::max(worst, std::abs(total[i] - after[i].get<double>()));
  EXPECT_LE(worst, 1e-5);

  const CliResult text = runCli({"explain", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds, "--layer", "1",
                                 "--head", "3", "--position", "7"});
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.describe();
  EXPECT_NE(text.out.find("5. through o_proj: head 3's output times its slice of o_proj (columns 48-63, [64 x 16])"),
            std::string::npos) << text.out;
  EXPECT_NE(text.out.find("matches the model's own forward after o_proj"), std::string::npos) << text.out;
}

TEST(CliExplain, Gpt2SaysNoRotaryAndPrintsReadableText) {
  const auto j = runJson({"explain", "--model", modelDir("gpt2-tiny"), "--prompt-ids", kIds, "--layer", "0",
                          "--head", "2", "--position", "4", "--json"});
  EXPECT_TRUE(j["rotary"].is_null());
  EXPECT_EQ(j["kv_head"], 2);
  EXPECT_NEAR(sum(j["weights"]), 1.0, 1e-5);

  const CliResult text = runCli({"explain", "--model", modelDir("gpt2-tiny"), "--prompt-ids", kIds, "--layer", "0",
                                 "--head", "2", "--position", "4"});
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.describe();
  EXPECT_NE(text.out.find("no rotary embedding"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("weight"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("match the model's own forward"), std::string::npos) << text.out;
}

TEST(CliExplain, BadLayerHeadOrPositionIsAnErrorWithTheValidRange) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--layer", "2", "--head", "0"}, "option --layer: 2 is out of range: the model has 2 layers (valid: 0-1)"},
      {{"--layer", "0", "--head", "4"}, "option --head: 4 is out of range: the model has 4 query heads (valid: 0-3)"},
      {{"--layer", "0", "--head", "0", "--position", "10"},
       "option --position: 10 is out of range: the prompt has 10 tokens"},
      {{"--head", "0"}, "missing required option --layer"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"explain", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds, "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliResult r = runCli(args);
    EXPECT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.describe();
  }
}

TEST(CliExplain, DroppedRowsLoseTheirWeightAndMoveTheDistribution) {
  const auto j = runJson({"explain", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds, "--layer", "0",
                          "--head", "1", "--drop-rows", "2,6", "--json"});
  EXPECT_EQ(j["position"], 9);  // the default: the last token
  const auto& w = j["what_if"];
  ASSERT_TRUE(w.is_object()) << j.dump();
  EXPECT_EQ(w["weights_after"].size(), 10u);
  EXPECT_EQ(w["weights_after"][2].get<double>(), 0.0);
  EXPECT_EQ(w["weights_after"][6].get<double>(), 0.0);
  EXPECT_NEAR(sum(w["weights_after"]), 1.0, 1e-5);
  EXPECT_GT(w["kl"].get<double>(), 0.0);
  EXPECT_TRUE(w["removed"][2].get<bool>());

  const CliResult own = runCli({"explain", "--model", modelDir("llama-tiny"), "--prompt-ids", kIds, "--layer", "0",
                                "--head", "1", "--drop-rows", "9"});
  EXPECT_EQ(own.exit_code, 2) << own.describe();
  EXPECT_NE(own.err.find("option --drop-rows: 9 is out of range"), std::string::npos) << own.describe();
  EXPECT_NE(own.err.find("valid: 0-8"), std::string::npos) << own.describe();
  EXPECT_TRUE(own.out.empty()) << "printed an explanation before failing:\n" << own.out;
}

}  // namespace
}  // namespace kvscope::cli_test
