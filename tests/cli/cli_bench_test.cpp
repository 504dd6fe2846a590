// kvscope-cli bench and make-model end to end: the report's structure and
// sanity (positive rates, the theoretical speedup formula applied to the
// measured alpha and c), never its timings; and models without a tokenizer.
#include <gtest/gtest.h>

#include <cmath>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

// Expected tokens per round over the round's cost in target steps, with the
// verify pass at `verify` steps (1 in Leviathan et al.'s formula).
double theoretical(double alpha, double gamma, double c, double verify = 1.0) {
  if (alpha >= 1.0) return (gamma + 1.0) / (gamma * c + verify);
  return (1.0 - std::pow(alpha, gamma + 1.0)) / ((1.0 - alpha) * (gamma * c + verify));
}

void expectTiming(const nlohmann::json& t, const std::string& what) {
  ASSERT_TRUE(t.is_object()) << what;
  EXPECT_GT(t["median_ms"].get<double>(), 0.0) << what;
  EXPECT_LE(t["min_ms"].get<double>(), t["median_ms"].get<double>()) << what;
  EXPECT_GE(t["max_ms"].get<double>(), t["median_ms"].get<double>()) << what;
  EXPECT_GE(t["trials"].get<int>(), 1) << what;
}

void expectSpeculative(const nlohmann::json& speculative) {
  ASSERT_TRUE(speculative.is_array());
  ASSERT_EQ(speculative.size(), 3u);  // --quick: gamma 1, 2, 4
  for (const auto& g : speculative) {
    const double alpha = g["alpha"].get<double>(), c = g["cost_ratio"].get<double>();
    const double gamma = g["gamma"].get<double>();
    EXPECT_GE(alpha, 0.0);
    EXPECT_LE(alpha, 1.0);
    EXPECT_GT(c, 0.0);
    EXPECT_NEAR(g["theoretical_speedup"].get<double>(), theoretical(alpha, gamma, c), 1e-9) << g.dump();
    const double verify = g["verify_over_step"].get<double>();
    EXPECT_NEAR(g["verify_priced_speedup"].get<double>(), theoretical(alpha, gamma, c, verify), 1e-9) << g.dump();
    EXPECT_GT(g["measured_over_verify_priced"].get<double>(), 0.0);
    EXPECT_GT(g["measured_speedup"]["median"].get<double>(), 0.0);
    EXPECT_GT(g["measured_over_theoretical"].get<double>(), 0.0);
    EXPECT_GT(g["verify_forward_ms"]["median"].get<double>(), 0.0);
    EXPECT_GT(g["drafter_forward_ms"]["median"].get<double>(), 0.0);
    EXPECT_GT(g["target_step_ms"]["median"].get<double>(), 0.0);
    EXPECT_GT(g["verify_over_step"].get<double>(), 0.0);
  }
}

TEST(CliBench, QuickRunOnTheBundledPairHasASaneReport) {
  const auto r = runJson({"bench", "--quick", "--json"});
  ASSERT_TRUE(r.contains("machine"));
  EXPECT_GT(r["machine"]["torch_threads"].get<int>(), 0);
  EXPECT_GT(r["target"]["parameters"].get<int64_t>(), 0);
  expectTiming(r["target"]["load"], "target load");
  EXPECT_GT(r["target"]["peak_rss_after_first_load_mb"].get<double>(), 0.0);
  ASSERT_TRUE(r["drafter"].is_object());

  const auto& a = r["autoregressive"];
  EXPECT_GT(a["cache_on"]["tokens_per_second"].get<double>(), 0.0);
  EXPECT_GT(a["cache_off"]["tokens_per_second"].get<double>(), 0.0);
  ASSERT_EQ(r["decode_by_context"].size(), 2u);
  for (const auto& e : r["decode_by_context"]) {
    expectTiming(e["cache_on"], "cached step at " + e["context"].dump());
    expectTiming(e["cache_off"], "uncached step at " + e["context"].dump());
  }
  const auto& b = r["forward_vs_baseline"];
  expectTiming(b["bare_matvec_pass"], "bare matvec");
  EXPECT_GT(b["bare_matvec_gb_per_s"].get<double>(), 0.0);
  EXPECT_GT(b["decode_over_bound"].get<double>(), 0.0);
  expectTiming(b["weight_read_pass"], "reading the stored weights");
  EXPECT_GT(b["weight_read_gb_per_s"].get<double>(), 0.0);
  EXPECT_NEAR(b["weight_gb_stored"].get<double>() * 1000, r["target"]["weights"]["resident_mb"].get<double>(), 1e-6);
  EXPECT_GT(b["decode_over_read_bound"].get<double>(), 0.0);
  EXPECT_GT(b["prefill_over_bare"].get<double>(), 0.0);

  // One entry per gamma of the speculative rows, gamma + 1 rows each, at the decode step's context.
  const auto& v = r["verify_forwards"];
  EXPECT_EQ(v["context"], b["decode_context"]);
  ASSERT_EQ(v["gammas"].size(), r["speculative"].size());
  for (size_t i = 0; i < v["gammas"].size(); ++i) {
    const auto& g = v["gammas"][i];
    EXPECT_EQ(g["gamma"], r["speculative"][i]["gamma"]);
    EXPECT_EQ(g["rows"].get<int64_t>(), g["gamma"].get<int64_t>() + 1);
    EXPECT_GT(g["step_ms"].get<double>(), 0.0);
    EXPECT_GT(g["forward_ms"].get<double>(), 0.0);
    const auto& ratio = g["forward_over_step"];
    EXPECT_GT(ratio["min"].get<double>(), 0.0);
    EXPECT_LE(ratio["min"].get<double>(), ratio["median"].get<double>());
    EXPECT_LE(ratio["median"].get<double>(), ratio["max"].get<double>());
    // The products' floor grows with the rows: the same time per row.
    if (v["multiply_add_peak_per_s"].is_number()) {
      EXPECT_NEAR(g["products_at_peak_ms"].get<double>() / g["rows"].get<double>(),
                  v["gammas"][0]["products_at_peak_ms"].get<double>() / v["gammas"][0]["rows"].get<double>(), 1e-9);
      EXPECT_GT(g["products_at_peak_over_step"].get<double>(), 0.0);
    }
  }
  EXPECT_GT(v["multiply_adds_per_row"].get<int64_t>(), 0);

  expectSpeculative(r["speculative"]);
  expectTiming(r["tracing"]["tracing_on"], "tracing on");
  expectTiming(r["tracing"]["tracing_off"], "tracing off");
  EXPECT_TRUE(std::isfinite(r["tracing"]["overhead"].get<double>()));
  EXPECT_GE(r["memory"]["peak_rss_mb"].get<double>(), r["target"]["peak_rss_after_first_load_mb"].get<double>());
}

// With a confidence stop the rounds draft at most gamma tokens: the report
// gives the drafts and tokens a round made and leaves the fixed-gamma formula out.
TEST(CliBench, AConfidenceStopReportsDraftsPerRoundInsteadOfTheFormula) {
  const auto r = runJson({"bench", "--quick", "--draft-confidence", "0.5", "--json"});
  ASSERT_TRUE(r["speculative"].is_array());
  ASSERT_EQ(r["speculative"].size(), 3u);
  for (const auto& g : r["speculative"]) {
    EXPECT_DOUBLE_EQ(g["draft_confidence"].get<double>(), 0.5);
    EXPECT_TRUE(g["theoretical_speedup"].is_null()) << g.dump();
    EXPECT_TRUE(g["verify_priced_speedup"].is_null()) << g.dump();
    const double drafts = g["drafts_per_round"]["median"].get<double>();
    EXPECT_GT(drafts, 0.0);
    EXPECT_LE(drafts, g["gamma"].get<double>());
    EXPECT_GT(g["mean_accepted_length"]["median"].get<double>(), 0.0);
    EXPECT_GT(g["measured_speedup"]["median"].get<double>(), 0.0);
  }
  // Without the stop only the last round drafts fewer than gamma (it may not
  // draft past the tokens asked for); with it, gamma 4 drafts fewer per round.
  const auto plain = runJson({"bench", "--quick", "--json"});
  ASSERT_EQ(plain["speculative"].size(), 3u);
  EXPECT_EQ(plain["speculative"][2]["gamma"], 4);
  EXPECT_GT(plain["speculative"][2]["drafts_per_round"]["median"].get<double>(), 3.0);
  EXPECT_LT(r["speculative"][2]["drafts_per_round"]["median"].get<double>(),
            plain["speculative"][2]["drafts_per_round"]["median"].get<double>());
  const CliResult human = runCli({"bench", "--quick", "--draft-confidence", "0.5"});
  EXPECT_EQ(human.exit_code, 0) << human.describe();
  EXPECT_NE(human.out.find("drafting stops after a draft below p = 0.500"), std::string::npos) << human.out;
}

TEST(CliBench, BadOptionsAreNamed) {
  const CliResult zero = runCli({"bench", "--quick", "--trials", "0"});
  EXPECT_EQ(zero.exit_code, 2) << zero.describe();
  EXPECT_NE(zero.err.find("trials"), std::string::npos) << zero.err;
  const CliResult gamma = runCli({"bench", "--quick", "--gammas", "0"});
  EXPECT_EQ(gamma.exit_code, 2) << gamma.describe();
  EXPECT_NE(gamma.err.find("gamma"), std::string::npos) << gamma.err;
  const CliResult stop = runCli({"bench", "--quick", "--draft-confidence", "1.5"});
  EXPECT_EQ(stop.exit_code, 2) << stop.describe();
  EXPECT_NE(stop.err.find("draft confidence must be a probability"), std::string::npos) << stop.err;
  const CliResult run = runCli({"run", "--prompt", "x", "--draft-confidence", "-1", "--no-baseline"});
  EXPECT_EQ(run.exit_code, 2) << run.describe();
  EXPECT_NE(run.err.find("draft confidence must be a probability"), std::string::npos) << run.err;
}

TEST(CliMakeModel, UnknownShapeIsNamed) {
  ScratchDir dir("make_model_bad");
  const CliResult r = runCli({"make-model", "--shape", "llama-9000b", "--out", dir.file("m")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("llama-9000b"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("qwen2.5-0.5b"), std::string::npos) << r.err;
}

// A random model of the bundled drafter's shape, with no tokenizer.json:
// it runs on ids, shows tokens as <id N>, and refuses text prompts clearly.
TEST(CliMakeModel, ModelWithoutTokenizerRunsOnIds) {
  ScratchDir dir("make_model");
  const std::string model = dir.file("drafter-shape");
  const auto made = runJson({"make-model", "--shape", "bundled-drafter", "--dtype", "bf16", "--seed", "3", "--out",
                             model, "--json"});
  EXPECT_FALSE(fs::exists(fs::path(model) / "tokenizer.json"));
  const auto inspected = runJson({"inspect", model, "--json"});
  EXPECT_EQ(inspected["parameters"], made["parameters"]);
  EXPECT_TRUE(inspected["tokenizer_vocab"].is_null());
  EXPECT_EQ(inspected["tensors"][0]["dtype"], "BF16");

  const auto generated = runJson({"generate", "--model", model, "--prompt-ids", "5,6,7", "--max-new", "4",
                                  "--ignore-eos", "--json"});
  ASSERT_EQ(generated["ids"].size(), 4u);
  EXPECT_EQ(generated["text"].get<std::string>().rfind("<id ", 0), 0u) << generated["text"];

  const auto ran = runJson({"run", "--target", model, "--drafter", model, "--prompt-ids", "5,6,7", "--max-new", "6",
                            "--gamma", "2", "--ignore-eos", "--no-baseline", "--json"});
  EXPECT_EQ(ran["ids"].size(), 6u);
  EXPECT_DOUBLE_EQ(ran["alpha"].get<double>(), 1.0);  // the drafter is the target: every draft is kept
  const CliResult plain =
      runCli({"run", "--target", model, "--drafter", model, "--prompt-ids", "5,6,7", "--max-new", "3", "--no-baseline"});
  EXPECT_TRUE(plain.exited && plain.exit_code == 0) << plain.describe();
  EXPECT_NE(plain.out.find("<id "), std::string::npos) << plain.out;

  for (const char* command : {"generate", "run"}) {
    const CliResult text = runCli({command, command == std::string("run") ? "--target" : "--model", model,
                                   "--prompt", "Hello", "--max-new", "2"});
    EXPECT_EQ(text.exit_code, 2) << text.describe();
    EXPECT_NE(text.err.find("no tokenizer.json"), std::string::npos) << text.err;
    EXPECT_NE(text.err.find("--prompt-ids"), std::string::npos) << text.err;
  }
}

TEST(CliBench, TargetWithoutDrafterOrTokenizer) {
  ScratchDir dir("bench_no_drafter");
  const std::string model = dir.file("target-shape");
  runJson({"make-model", "--shape", "bundled-drafter", "--dtype", "f32", "--out", model, "--json"});
  const auto r = runJson({"bench", "--target", model, "--quick", "--json"});
  EXPECT_TRUE(r["speculative"].is_null());
  EXPECT_TRUE(r["drafter"].is_null());
  EXPECT_FALSE(r["target"]["has_tokenizer"].get<bool>());
  EXPECT_GT(r["autoregressive"]["cache_on"]["tokens_per_second"].get<double>(), 0.0);
  expectTiming(r["tracing"]["tracing_on"], "tracing on, no drafter");
}

}  // namespace
}  // namespace kvscope::cli_test
