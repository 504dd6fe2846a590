// kvscope-cli run and diff with several prompts (a batch, docs/batching.md):
// run --json reports one object per sequence whose tokens are that prompt's
// tokens decoded alone; diff of a batch fault names the sequence the batch's
// own per-round acceptance says broke first; bad prompt options are refused
// with a clear message.
#include <filesystem>
#include <fstream>

#include "tests/cli/cli_test_support.h"

namespace kvscope::cli_test {
namespace {

std::vector<std::string> pairArgs() {
  return {"--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"), "--gamma", "3",
          "--max-new", "16", "--ignore-eos", "--no-baseline"};
}

const std::vector<std::string> kPrompts{"Once upon a time", "The", "A long time ago in a galaxy far, far away there"};

std::vector<std::string> withPrompts(std::vector<std::string> args) {
  for (const std::string& p : kPrompts) args.insert(args.end(), {"--prompt", p});
  return args;
}

TEST(CliBatch, RunReportsEverySequenceAsDecodedAlone) {
  std::vector<std::string> args{"run"};
  for (const auto& a : pairArgs()) args.push_back(a);
  args = withPrompts(args);
  args.push_back("--json");
  const auto batch = runJson(args);
  ASSERT_EQ(batch["batch"], 3);
  ASSERT_EQ(batch["sequences"].size(), 3u);
  EXPECT_LT(batch["batched_forwards"].get<int64_t>(), batch["sequence_forwards"].get<int64_t>());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    std::vector<std::string> alone{"run"};
    for (const auto& a : pairArgs()) alone.push_back(a);
    alone.insert(alone.end(), {"--prompt", kPrompts[i], "--json"});
    const auto single = runJson(alone);
    EXPECT_EQ(batch["sequences"][i]["ids"], single["ids"]) << "sequence " << i;
    EXPECT_EQ(batch["sequences"][i]["prompt_ids"], single["prompt_ids"]) << "sequence " << i;
    EXPECT_EQ(batch["sequences"][i]["sequence"], i);
  }
}

TEST(CliBatch, PromptsFileIsOnePromptPerLine) {
  const auto path = std::filesystem::temp_directory_path() / ("kvscope_prompts_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(path);
    out << kPrompts[0] << "\n\n" << kPrompts[1] << "\r\n" << kPrompts[2] << "\n";
  }
  std::vector<std::string> args{"run"};
  for (const auto& a : pairArgs()) args.push_back(a);
  args.insert(args.end(), {"--prompts", path.string(), "--json"});
  const auto from_file = runJson(args);
  std::vector<std::string> repeated{"run"};
  for (const auto& a : pairArgs()) repeated.push_back(a);
  repeated = withPrompts(repeated);
  repeated.push_back("--json");
  const auto from_flags = runJson(repeated);
  ASSERT_EQ(from_file["sequences"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(from_file["sequences"][i]["ids"], from_flags["sequences"][i]["ids"]);
  std::filesystem::remove(path);
}

// The first round in which the last sequence rejected a draft, from the
// clean batch's own round lines (one per sequence and round).
int64_t firstRejectionOfTheLast(const CliResult& run, int64_t last) {
  for (const std::string& line : run.stdoutLines()) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("sequence") || j["sequence"] != last || !j.contains("drafts")) continue;
    if (j["accepted"].get<size_t>() < j["drafts"].size()) return j["round"].get<int64_t>();
  }
  return -1;
}

TEST(CliBatch, DiffNamesTheSequenceTheBatchFaultHarmed) {
  std::vector<std::string> run{"run"};
  for (const auto& a : pairArgs()) run.push_back(a);
  run = withPrompts(run);
  run.push_back("--json");
  CliResult clean_run;
  runJson(run, &clean_run);
  const int64_t round = firstRejectionOfTheLast(clean_run, 2);
  ASSERT_GE(round, 1);

  std::vector<std::string> diff{"diff"};
  for (const auto& a : pairArgs()) {
    if (a != "--no-baseline") diff.push_back(a);
  }
  diff = withPrompts(diff);
  diff.insert(diff.end(), {"--fault", "length-not-rolled-back", "--json"});
  const CliResult r = runCli(diff);
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["root_cause"]["sequence"], 2) << j["explanation"];
  EXPECT_EQ(j["root_cause"]["round"], round) << j["explanation"];
  EXPECT_EQ(j["root_cause"]["phase"], "prune");

  std::vector<std::string> clean = diff;
  clean[clean.size() - 2] = "none";
  const CliResult ok = runCli(clean);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
}

TEST(CliBatch, BadPromptOptionsAreRefusedClearly) {
  const auto expectRefused = [](std::vector<std::string> args, const std::string& says) {
    const CliResult r = runCli(args);
    EXPECT_TRUE(r.exited && r.exit_code != 0) << r.describe();
    EXPECT_NE(r.err.find(says), std::string::npos) << r.describe();
  };
  std::vector<std::string> base{"run"};
  for (const auto& a : pairArgs()) base.push_back(a);
  auto mixed = base;
  mixed.insert(mixed.end(), {"--prompt", "a", "--prompt-ids", "1,2"});
  expectRefused(mixed, "one way");
  auto missing = base;
  missing.insert(missing.end(), {"--prompts", "/nonexistent/prompts.txt"});
  expectRefused(missing, "--prompts /nonexistent/prompts.txt");
  auto single_fault = base;
  single_fault.insert(single_fault.end(), {"--prompt", "a", "--fault", "uniform-advance"});
  expectRefused(single_fault, "two or more prompts");
  auto traced = base;
  traced.insert(traced.end(), {"--prompt", "a", "--prompt", "b", "--trace", "/tmp/never.kvtrace"});
  expectRefused(traced, "cannot be saved as a trace");
  auto generate_twice = std::vector<std::string>{"generate", "--target", modelDir("llama-tiny"), "--prompt", "a", "--prompt", "b"};
  expectRefused(generate_twice, "given 2 times");
}

}  // namespace
}  // namespace kvscope::cli_test
