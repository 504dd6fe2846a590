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

// The batch's clean `run --json` (every round line), and the round in which
// its last sequence first rejected a draft.
std::vector<std::string> batchRun() {
  std::vector<std::string> run{"run"};
  for (const auto& a : pairArgs()) run.push_back(a);
  run = withPrompts(run);
  run.push_back("--json");
  return run;
}

int64_t cleanRoundTheLastRejects() {
  CliResult clean_run;
  runJson(batchRun(), &clean_run);
  return firstRejectionOfTheLast(clean_run, 2);
}

// `command` (diff, audit) of the batch with `fault`, --json.
std::vector<std::string> batchCommand(const std::string& command, const std::string& fault) {
  std::vector<std::string> args{command};
  for (const auto& a : pairArgs()) {
    if (a != "--no-baseline") args.push_back(a);
  }
  args = withPrompts(args);
  args.insert(args.end(), {"--fault", fault, "--json"});
  return args;
}

TEST(CliBatch, DiffNamesTheSequenceTheBatchFaultHarmed) {
  const int64_t round = cleanRoundTheLastRejects();
  ASSERT_GE(round, 1);
  const std::vector<std::string> diff = batchCommand("diff", "length-not-rolled-back");
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

// The padded layout (docs/batching.md, "The padded layout"): run gives every
// sequence the tokens it gets alone; diff under padding-mask-dropped names
// the lowest sequence whose prompt was left-padded (shorter than the
// longest, per the clean padded run's own prompt_ids) at its first forward
// after the prefill (its first round line: a draft step when it drafted).
TEST(CliBatch, PaddedRunEqualsAloneAndItsMaskFaultNamesThePaddedSequence) {
  std::vector<std::string> run = batchRun();
  run.insert(run.end() - 1, {"--batch-layout", "padded"});
  CliResult clean_run;
  const auto padded = runJson(run, &clean_run);
  const auto ragged = runJson(batchRun());
  ASSERT_EQ(padded["sequences"].size(), 3u);
  size_t longest = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(padded["sequences"][i]["ids"], ragged["sequences"][i]["ids"]) << "sequence " << i;
    longest = std::max(longest, padded["sequences"][i]["prompt_ids"].size());
  }
  int64_t expected = -1;
  for (size_t i = 0; i < 3 && expected < 0; ++i) {
    const size_t own = padded["sequences"][i]["prompt_ids"].size();
    if (own > 1 && own < longest) expected = static_cast<int64_t>(i);  // a prefill, left-padded
  }
  ASSERT_GE(expected, 0) << "no prompt was padded";
  nlohmann::json first_round;
  for (const std::string& line : clean_run.stdoutLines()) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("sequence") && j["sequence"] == expected && j.contains("drafts")) {
      first_round = j;
      break;
    }
  }
  ASSERT_TRUE(first_round.is_object()) << clean_run.describe();
  const bool drafted = !first_round["drafts"].empty();

  std::vector<std::string> diff = batchCommand("diff", "padding-mask-dropped");
  diff.insert(diff.end() - 1, {"--batch-layout", "padded"});
  const CliResult r = runCli(diff);
  ASSERT_TRUE(r.exited) << r.describe();
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  ASSERT_TRUE(j["root_cause"].is_object()) << r.describe();
  EXPECT_EQ(j["root_cause"]["sequence"], expected) << j["explanation"];
  EXPECT_EQ(j["root_cause"]["kind"], "padding") << j["explanation"];
  EXPECT_EQ(j["root_cause"]["round"], first_round["round"]) << j["explanation"];
  EXPECT_EQ(j["root_cause"]["phase"], drafted ? "draft" : "verify") << j["explanation"];
  EXPECT_EQ(j["root_cause"]["cache"], drafted ? "drafter" : "target") << j["explanation"];

  // Saved as a trace, the file alone names the same breach (pad rows and the
  // rows each forward hid are in the file's ledger and events).
  const auto path = std::filesystem::temp_directory_path() / ("kvscope_padded_" + std::to_string(::getpid()) + ".kvtrace");
  auto faulty = run;
  faulty.insert(faulty.end() - 1, {"--fault", "padding-mask-dropped", "--trace", path.string()});
  runJson(faulty);
  const auto summary = runJson({"trace", path.string(), "--json"});
  EXPECT_EQ(summary["first_broken"], expected) << summary.dump();
  EXPECT_EQ(summary["root_cause"]["kind"], "padding") << summary.dump();
  EXPECT_EQ(summary["root_cause"]["round"], first_round["round"]) << summary.dump();
  std::filesystem::remove(path);

  // Without the padded layout the fault is refused, saying how to run it.
  std::vector<std::string> ragged_fault = batchCommand("diff", "padding-mask-dropped");
  const CliResult refused = runCli(ragged_fault);
  EXPECT_EQ(refused.exit_code, 2) << refused.describe();
  EXPECT_NE(refused.err.find("--batch-layout padded"), std::string::npos) << refused.describe();
}

// audit of a batch: each sequence audited at its own root cause; under
// length-not-rolled-back only the last sequence has wrong rows, at the round
// the clean batch's own round lines say it first rejected a draft.
TEST(CliBatch, AuditNamesTheSequenceWithWrongRows) {
  const int64_t round = cleanRoundTheLastRejects();
  ASSERT_GE(round, 1);
  const std::vector<std::string> audit = batchCommand("audit", "length-not-rolled-back");
  const CliResult r = runCli(audit);
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_EQ(j["sequences"].size(), 3u) << r.describe();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["sequences"][i]["sequence"], i);
    EXPECT_EQ(j["sequences"][i]["ok"].get<bool>(), i != 2) << "sequence " << i << ": " << j["sequences"][i].dump();
  }
  EXPECT_EQ(j["sequences"][2]["round"], round);
  EXPECT_EQ(j["sequences"][2]["phase"], "prune");
  EXPECT_FALSE(j["sequences"][2]["rows"].empty());

  auto one = audit;
  one.insert(one.end() - 1, {"--sequence", "1"});
  const auto just_one = runJson(one);
  ASSERT_EQ(just_one["sequences"].size(), 1u);
  EXPECT_EQ(just_one["sequences"][0]["sequence"], 1);

  auto clean = audit;
  clean[clean.size() - 2] = "none";
  const CliResult ok = runCli(clean);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
}

// A batch saved as a trace: `trace` names, from the file alone, the sequence
// and round the clean batch's own round lines say broke first.
TEST(CliBatch, TraceOfABatchNamesTheSequenceThatBrokeFirst) {
  const int64_t round = cleanRoundTheLastRejects();
  ASSERT_GE(round, 1);

  const auto path = std::filesystem::temp_directory_path() / ("kvscope_batch_" + std::to_string(::getpid()) + ".kvtrace");
  auto faulty = batchRun();
  faulty.insert(faulty.end() - 1, {"--fault", "length-not-rolled-back", "--trace", path.string()});
  runJson(faulty);
  const auto summary = runJson({"trace", path.string(), "--json"});
  EXPECT_EQ(summary["format_version"], 4);
  EXPECT_EQ(summary["batch"], 3);
  ASSERT_EQ(summary["sequences"].size(), 3u) << summary.dump();
  EXPECT_EQ(summary["first_broken"], 2) << summary.dump();
  EXPECT_EQ(summary["root_cause"]["sequence"], 2);
  EXPECT_EQ(summary["root_cause"]["round"], round);
  EXPECT_EQ(summary["root_cause"]["phase"], "prune");
  EXPECT_TRUE(summary["sequences"][0]["root_cause"].is_null());
  EXPECT_TRUE(summary["sequences"][1]["root_cause"].is_null());
  const CliResult text = runCli({"trace", path.string()});
  EXPECT_NE(text.out.find("first breach: sequence 2"), std::string::npos) << text.describe();
  std::filesystem::remove(path);
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
  auto generate_twice = std::vector<std::string>{"generate", "--target", modelDir("llama-tiny"), "--prompt", "a", "--prompt", "b"};
  expectRefused(generate_twice, "given 2 times");
}

}  // namespace
}  // namespace kvscope::cli_test
