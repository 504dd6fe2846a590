// kvscope-cli run --capture of a batch (docs/batching.md#captures-of-a-batch),
// then check: a clean batch is clean for every sequence, contiguous and
// paged (blocks of 2 and 4: version 3 with the pool), in batches of 2, 3 and
// 8 of prompts of different lengths; under a batch fault check names the
// sequence, the cache and kvscope's own round and phase that diff's walker
// names for the same run (one verdict).
#include <fstream>
#include <functional>
#include <iterator>

#include "tests/cli/cli_test_support.h"

namespace kvscope::cli_test {
namespace {

const std::vector<std::string> kPrompts{"Once upon a time", "The", "A long time ago in a galaxy far, far away there",
                                        "She went to the", "Hello", "The little dog ran", "In the beginning", "It"};

std::vector<std::string> batchArgs(const std::string& command, size_t sequences, const std::string& layout,
                                   const std::string& fault, const std::string& gamma = "3") {
  std::vector<std::string> args{command, "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                                "--gamma", gamma, "--max-new", "16", "--ignore-eos", "--cache-layout", layout,
                                "--fault", fault, "--json"};
  for (size_t i = 0; i < sequences; ++i) args.insert(args.end(), {"--prompt", kPrompts[i]});
  return args;
}

// Writes the batch's capture and checks it; returns check's JSON.
nlohmann::json captureAndCheck(const ScratchDir& scratch, size_t sequences, const std::string& layout,
                               const std::string& fault, int expected_exit, const std::string& gamma = "3") {
  const std::string capture = scratch.file(fault + std::to_string(sequences) + ".kvcapture");
  auto run = batchArgs("run", sequences, layout, fault, gamma);
  run.insert(run.end(), {"--capture", capture, "--no-baseline"});
  const CliResult written = runCli(run);
  EXPECT_EQ(written.exit_code, 0) << written.describe();
  EXPECT_EQ(manifestOf(capture)["version"], layout == "contiguous" ? 2 : 3) << layout;
  EXPECT_EQ(manifestOf(capture)["batch"], sequences);
  const CliResult check = runCli({"check", capture, "--json"});
  EXPECT_EQ(check.exit_code, expected_exit) << check.describe();
  nlohmann::json j = check.lastJson();
  j["manifest"] = manifestOf(capture);
  return j;
}

TEST(CliBatchCapture, ACleanBatchIsCleanForEverySequence) {
  ScratchDir scratch("batch-capture-clean");
  for (const std::string layout : {"contiguous", "paged:2", "paged:4"}) {
    for (const size_t sequences : {2u, 3u, 8u}) {
      const auto j = captureAndCheck(scratch, sequences, layout, "none", 0);
      ASSERT_TRUE(j.is_object());
      EXPECT_EQ(j["batch"], sequences) << layout;
      EXPECT_TRUE(j["root_cause"].is_null()) << layout << " batch " << sequences << ": " << j["root_cause"].dump();
      EXPECT_GT(j["rows_value_checked"].get<int64_t>(), 0);
      EXPECT_GT(j["logit_rows_checked"].get<int64_t>(), 0);
      for (const auto& call : j["manifest"]["calls"]) {  // the pool in every state of a paged batch, none otherwise
        EXPECT_EQ(call["before"].contains("paged"), layout != "contiguous") << layout;
        EXPECT_EQ(call["after"].contains("paged"), layout != "contiguous") << layout;
      }
      // every sequence's committed tokens are the run's own
      const auto ran = runJson(batchArgs("run", sequences, layout, "none"));
      for (size_t b = 0; b < sequences; ++b) {
        std::vector<int64_t> committed = ran["sequences"][b]["prompt_ids"].get<std::vector<int64_t>>();
        for (int64_t id : ran["sequences"][b]["ids"].get<std::vector<int64_t>>()) committed.push_back(id);
        EXPECT_EQ(j["manifest"]["committed"][b].get<std::vector<int64_t>>(), committed) << "sequence " << b;
      }
    }
  }
}

class BatchCaptureFault : public ::testing::TestWithParam<std::string> {};

// check names the sequence, cache, round and phase diff's walker names.
TEST_P(BatchCaptureFault, CheckNamesWhatDiffNames) {
  const std::string fault = GetParam();
  ScratchDir scratch("batch-capture-" + fault);
  const CliResult diff_run = runCli(batchArgs("diff", 3, "contiguous", fault));
  const auto diff = diff_run.lastJson();
  ASSERT_TRUE(diff.is_object() && diff["root_cause"].is_object()) << diff_run.describe();
  const auto j = captureAndCheck(scratch, 3, "contiguous", fault, 1);
  ASSERT_TRUE(j["root_cause"].is_object()) << j.dump();
  const auto& want = diff["root_cause"];
  const auto& got = j["root_cause"];
  ASSERT_TRUE(want["sequence"].is_number_integer()) << want.dump();
  EXPECT_EQ(got["sequence"], want["sequence"]) << got["what"] << "\ndiff: " << want.dump();
  EXPECT_EQ(got["role"], want["cache"]) << got["what"] << "\ndiff: " << want.dump();
  const auto [round, phase] = sessionMoment(j["manifest"], got);
  EXPECT_EQ(round, want["round"].get<int64_t>()) << got["what"] << "\ndiff: " << want.dump();
  EXPECT_EQ(phase, want["phase"].get<std::string>()) << got["what"] << "\ndiff: " << want.dump();
}

INSTANTIATE_TEST_SUITE_P(Faults, BatchCaptureFault, ::testing::Values("uniform-advance", "length-not-rolled-back"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// A paged batch's capture carries the pool (version 3): under
// freed-block-reused check names the rollback diff names, in the same
// sequence, cache, round and phase, with blocks diff says the table still
// maps after the pool freed them (docs/batching.md#captures-of-a-batch).
// Gamma 1 on a batch of 8 makes a sequence other than the first break first.
TEST(CliBatchCapture, FreedBlockReusedIsNamedAtTheRollbackDiffNames) {
  ScratchDir scratch("batch-capture-freed");
  struct Run {
    std::string layout;
    size_t sequences;
    std::string gamma;
  };
  std::vector<Run> runs{{"paged:2", 8, "1"}, {"paged:4", 8, "1"}};
  for (const std::string layout : {"paged:2", "paged:4"}) {
    for (const size_t sequences : {2u, 3u, 8u}) runs.push_back({layout, sequences, "3"});
  }
  for (const auto& [layout, sequences, gamma] : runs) {
    const std::string at = layout + " batch " + std::to_string(sequences) + " gamma " + gamma;
    const CliResult diff_run = runCli(batchArgs("diff", sequences, layout, "freed-block-reused", gamma));
    const auto diff = diff_run.lastJson();
    ASSERT_TRUE(diff.is_object() && diff["root_cause"].is_object()) << diff_run.describe();
    const auto& want = diff["root_cause"];
    ASSERT_EQ(want["kind"], "block") << want.dump();
    if (gamma == "1") EXPECT_GT(want["sequence"].get<int64_t>(), 0) << at << ": the run meant to break a later sequence";
    const auto j = captureAndCheck(scratch, sequences, layout, "freed-block-reused", 1, gamma);
    ASSERT_TRUE(j["root_cause"].is_object()) << j.dump();
    const auto& got = j["root_cause"];
    EXPECT_EQ(got["sequence"], want["sequence"]) << at << ": " << got["what"] << "\ndiff: " << want.dump();
    EXPECT_EQ(got["role"], want["cache"]) << at << ": " << got["what"];
    EXPECT_EQ(got["step"], "between") << at << ": " << got["what"];
    EXPECT_EQ(got["kind"], "block") << at << ": " << got["what"];
    const auto [round, phase] = sessionMoment(j["manifest"], got);
    EXPECT_EQ(round, want["round"].get<int64_t>()) << at << ": " << got["what"] << "\ndiff: " << want.dump();
    EXPECT_EQ(phase, want["phase"].get<std::string>()) << at << ": " << got["what"] << "\ndiff: " << want.dump();
    // Each block check names is one diff names, with the same rows.
    ASSERT_TRUE(got["dangling_blocks"].is_array() && !got["dangling_blocks"].empty()) << got.dump();
    for (const auto& block : got["dangling_blocks"]) {
      bool named = false;
      for (const auto& d : want["dangling_blocks"]) {
        named = named || (d["block"] == block["block"] && d["first_row"] == block["first_row"] && d["rows"] == block["rows"]);
      }
      EXPECT_TRUE(named) << at << ": check " << block.dump() << "\ndiff: " << want["dangling_blocks"].dump();
    }
    EXPECT_NE(got["what"].get<std::string>().find("(a freed block)"), std::string::npos) << got["what"];
  }
}

// The capture at `from` written to `to` with its manifest edited.
void rewriteManifest(const std::string& from, const std::string& to, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(from, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  nlohmann::json manifest = nlohmann::json::parse(header["__metadata__"]["kvscope_capture"].get<std::string>());
  edit(manifest);
  header["__metadata__"]["kvscope_capture"] = manifest.dump();
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data offsets count from the end of the header
  std::ofstream out(to, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  out << text << bytes.substr(8 + n);
}

// Without the free lists check cannot tell a freed block from a reused one:
// the rollback is not named as a freed block, the wrong rows are found later
// (core/check/freed_block_rule.h needs them).
TEST(CliBatchCapture, WithoutFreeListsTheRollbackIsNotNamedAsAFreedBlock) {
  ScratchDir scratch("batch-capture-no-free");
  const auto j = captureAndCheck(scratch, 3, "paged:2", "freed-block-reused", 1);
  ASSERT_EQ(j["root_cause"]["kind"], "block") << j["root_cause"].dump();
  const std::string capture = scratch.file("freed-block-reused3.kvcapture"), edited = scratch.file("no-free.kvcapture");
  rewriteManifest(capture, edited, [](nlohmann::json& manifest) {
    for (auto& call : manifest["calls"]) {
      call["before"]["paged"]["free"] = nullptr;
      call["after"]["paged"]["free"] = nullptr;
    }
  });
  const CliResult check = runCli({"check", edited, "--json"});
  EXPECT_EQ(check.exit_code, 1) << check.describe();
  const auto cause = check.lastJson()["root_cause"];
  ASSERT_TRUE(cause.is_object()) << check.describe();
  EXPECT_NE(cause["kind"], "block") << cause.dump();
  EXPECT_EQ(cause["sequence"], j["root_cause"]["sequence"]) << cause.dump();
  EXPECT_FALSE(cause.contains("dangling_blocks")) << cause.dump();
}

}  // namespace
}  // namespace kvscope::cli_test
