// Hostile traces through the CLI: `kvscope-cli trace FILE` validates and summarises
// a trace without models, refuses hostile traces with a named error (exit 2,
// never a crash or "internal error"), and token id lists are parsed strictly.
#include <chrono>
#include <functional>

#include "app/cli/args.h"
#include "cli_test_support.h"
#include "core/error.h"
#include "core/model/safetensors.h"

namespace kvscope::cli_test {
namespace {

// A trace of a faulty run, recorded once per test process.
const std::string& recordedTrace() {
  static ScratchDir dir("hostile_trace");
  static const std::string path = [] {
    const std::string p = dir.file("run.kvtrace");
    const CliResult r = runCli({"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                                "--prompt", "Once upon a time", "--gamma", "3", "--max-new", "10", "--greedy",
                                "--fault", "prune-short", "--ignore-eos", "--no-baseline", "--trace", p, "--json"});
    EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
    return p;
  }();
  return path;
}

// A copy of the recorded trace with its metadata JSON and tensors edited.
std::string editedTrace(const std::string& path, const std::function<void(nlohmann::json&)>& edit_doc,
                        const std::function<void(std::vector<StWriteTensor>&, std::vector<std::vector<char>>&)>&
                            edit_tensors = {}) {
  const auto st = SafetensorsFile::open(recordedTrace());
  std::vector<StWriteTensor> tensors;
  for (const StTensorInfo& info : st->tensors())
    tensors.push_back({info.name, info.dtype, info.shape, st->data(info), static_cast<size_t>(info.end - info.begin)});
  nlohmann::json doc = nlohmann::json::parse(st->metadata().at("kvscope"));
  edit_doc(doc);
  std::vector<std::vector<char>> buffers;
  buffers.reserve(16);
  if (edit_tensors) edit_tensors(tensors, buffers);
  writeSafetensors(path, tensors, {{"kvscope", doc.dump()}, {"format", "pt"}});
  return path;
}

// Expects `trace FILE` to refuse with exit 2, the file and every part in
// stderr, no internal error, quickly.
void expectTraceRefused(const std::string& path, const std::vector<std::string>& parts) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = runCli({"trace", path, "--json"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.exited) << "crashed\n" << r.describe();
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find(path), std::string::npos) << r.describe();
  for (const auto& part : parts) EXPECT_NE(r.err.find(part), std::string::npos) << "'" << part << "'\n" << r.describe();
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.describe();
  EXPECT_LT(seconds, 5.0) << "includes the process start";
}

TEST(CliTrace, SummarisesARecordedRunWithoutModels) {
  const auto s = runJson({"trace", recordedTrace(), "--json"});
  EXPECT_EQ(s["valid"], true);
  EXPECT_EQ(s["file"], recordedTrace());
  EXPECT_EQ(s["fault"], "prune-short");
  EXPECT_NE(s["prompt"].get<std::string>().find("Once upon a time"), std::string::npos) << s["prompt"];
  EXPECT_EQ(s["generated_tokens"], 10);
  EXPECT_GT(s["rounds"]["rounds"].get<int64_t>(), 0);
  EXPECT_EQ(s["models"]["target"]["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(s["models"]["target"]["layers"], 2);
  EXPECT_EQ(s["models"]["target"]["name"], "llama-tiny");
  EXPECT_EQ(s["investigation"]["has_diff"], false);
  EXPECT_TRUE(s["investigation"]["root_cause"].is_null());
  EXPECT_GT(s["cache_events"].get<int64_t>(), 0);

  const CliResult text = runCli({"trace", recordedTrace()});
  EXPECT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("a valid kvscope trace"), std::string::npos) << text.describe();
  EXPECT_NE(text.out.find("fault prune-short"), std::string::npos) << text.describe();
  EXPECT_NE(text.out.find("none in the trace"), std::string::npos) << text.describe();
}

TEST(CliTrace, NamesFromTheFileCannotDriveTheTerminal) {
  ScratchDir dir("terminal");
  const std::string path = editedTrace(dir.file("escapes.kvtrace"), [](nlohmann::json& doc) {
    doc["info"]["target"]["name"] = "\x1b[5m\x1b[31mblinking\x1b[0m";
    doc["info"]["target"]["architecture"] = "Llama\rForCausalLM";
    doc["info"]["drafter"]["description"] = "model\x07drafter";
  });
  const CliResult text = runCli({"trace", path});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  const std::string& summary = text.out;  // the text report alone: no JSON without --json
  EXPECT_EQ(summary.find('\x1b'), std::string::npos) << summary;
  EXPECT_EQ(summary.find('\x07'), std::string::npos) << summary;
  EXPECT_EQ(summary.find('\r'), std::string::npos) << summary;
  EXPECT_NE(summary.find("\\x1b[5m"), std::string::npos) << "shown escaped, not dropped: " << summary;
}

TEST(CliTrace, ShowsTheRootCauseTheTraceHolds) {
  ScratchDir dir("root_cause");
  const std::string path = editedTrace(dir.file("diff.kvtrace"), [](nlohmann::json& doc) {
    doc["info"]["investigation"] = {
        {"fault", "prune-short"},
        {"diff", nlohmann::json::parse(R"({"mode":"lockstep","agree_positions":3,"noise_positions":0,
          "divergent_positions":2,"max_abs_logit_diff":1.5,"top1_flips":1,"min_top2_margin":0.2,
          "first_divergence":{"cache":"target","round":2,"phase":"verify","position":7,"layer":0,"head":1,"row":6},
          "root_cause":{"event":4,"cache":"target","round":1,"phase":"prune","operation":"crop","expected_rows":6,
            "actual_rows":7,"layers":[0,1],"rows":[6],"row_details":[],"fault_action":"kept one row too many",
            "what":"round 1's target prune kept a rejected draft's row"}})")}};
  });
  const auto s = runJson({"trace", path, "--json"});
  EXPECT_EQ(s["investigation"]["has_diff"], true);
  EXPECT_EQ(s["investigation"]["root_cause"]["round"], 1);
  EXPECT_EQ(s["investigation"]["root_cause"]["operation"], "crop");
  EXPECT_EQ(s["investigation"]["root_cause"]["what"], "round 1's target prune kept a rejected draft's row");
  EXPECT_NE(s["investigation"]["explanation"].get<std::string>().find("diverged at round 2 position 7"), std::string::npos);

  const std::string broken = editedTrace(dir.file("broken.kvtrace"), [](nlohmann::json& doc) {
    doc["info"]["investigation"] = {{"diff", {{"mode", 5}}}};
  });
  expectTraceRefused(broken, {"corrupted trace", "info.investigation.diff"});
}

TEST(CliTrace, RefusesInconsistentAttentionShapes) {
  ScratchDir dir("shapes");
  const std::string path = editedTrace(
      dir.file("shapes.kvtrace"), [](nlohmann::json&) {},
      [](std::vector<StWriteTensor>& tensors, std::vector<std::vector<char>>& buffers) {
        for (StWriteTensor& t : tensors) {
          if (t.name != "round.1.attention.1") continue;
          buffers.emplace_back(size_t{2} * 1024 * 1024 * 4, 0);  // [2, 1024, 1024] F32 where [1, q, k] belongs
          t.dtype = StDType::F32;
          t.shape = {2, 1024, 1024};
          t.data = buffers.back().data();
          t.nbytes = buffers.back().size();
        }
      });
  expectTraceRefused(path, {"corrupted trace", "attention layer 1", "disagrees"});
}

TEST(CliTrace, RefusesHugeIdsAndDeepMetadata) {
  ScratchDir dir("ids");
  expectTraceRefused(editedTrace(dir.file("ids.kvtrace"),
                                 [](nlohmann::json& doc) { doc["token_text"]["1000000000"] = "x"; }),
                     {"token_text id 1000000000 is outside the vocabulary"});
  expectTraceRefused(editedTrace(dir.file("layers.kvtrace"),
                                 [](nlohmann::json& doc) { doc["record"]["target_layers"] = 1e300; }),
                     {"/record/target_layers", "64-bit integer"});
  expectTraceRefused(editedTrace(dir.file("version.kvtrace"), [](nlohmann::json& doc) { doc["version"] = "2"; }),
                     {"version \"2\" is not supported"});
  // Not a trace at all.
  expectTraceRefused(modelDir("llama-tiny") + "/model.safetensors", {"not a kvscope trace"});
}

TEST(CliArgs, IdListsAreStrict) {
  EXPECT_EQ(cli::parseIdList("1,22,333", "ids"), (std::vector<int64_t>{1, 22, 333}));
  EXPECT_EQ(cli::parseIdList("0", "ids"), (std::vector<int64_t>{0}));
  struct Case {
    std::string text, message;
  };
  for (const Case& c : {Case{"1,", "id #2 is empty"}, Case{",1", "id #1 is empty"}, Case{"1,,2", "id #2 is empty"},
                        Case{"", "at least one id"}, Case{"+1", "'+1' is not a token id"},
                        Case{" 1", "' 1' is not a token id"}, Case{"1 ", "'1 ' is not a token id"},
                        Case{"-1", "'-1' is not a token id"}, Case{"1.0", "'1.0' is not a token id"},
                        Case{"0x10", "'0x10' is not a token id"}, Case{"99999999999999999999", "too large"}}) {
    SCOPED_TRACE("'" + c.text + "'");
    try {
      cli::parseIdList(c.text, "ids");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--ids"), std::string::npos) << e.what();
    }
  }
}

// std::stoll took " 5" and "+5", std::stod took "nan" and "inf".
TEST(CliArgs, IntegersAndNumbersAreStrict) {
  const auto args = [](const std::string& name, const std::string& value) {
    return cli::Args({"--" + name, value}, {});
  };
  auto good = args("layer", "-12");
  EXPECT_EQ(good.integer("layer", 0), -12);
  auto fraction = args("budget", "0.25");
  EXPECT_EQ(fraction.number("budget", 0), 0.25);
  for (const std::string text : {"1.5", "1e3", "+1", " 1", "1 ", "0x1", "", "-", "nan"}) {
    SCOPED_TRACE("'" + text + "'");
    auto a = args("layer", text);
    try {
      a.integer("layer", 0);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("option --layer expects an integer, got '" + text + "'"), std::string::npos)
          << e.what();
    }
  }
  for (const std::string text : {"99999999999999999999", "-99999999999999999999"}) {
    auto a = args("layer", text);
    try {
      a.integer("layer", 0);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not fit a 64-bit integer"), std::string::npos) << e.what();
    }
  }
  for (const std::string text : {"nan", "inf", "-inf", "1e400", " 0.5", "0.5x", ""}) {
    SCOPED_TRACE("'" + text + "'");
    auto a = args("budget", text);
    try {
      a.number("budget", 0);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("option --budget expects a finite number"), std::string::npos) << e.what();
    }
  }
}

TEST(CliArgs, IdListTyposAreRefusedByTheBinary) {
  for (const std::string ids : {"1,", "+1", " 1"}) {
    const CliResult r = runCli({"detokenize", "--model", modelDir("llama-tiny"), "--ids", ids});
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_NE(r.err.find("--ids"), std::string::npos) << r.describe();
  }
}


// Every error is printed with its control characters escaped: errors name
// what they refused, and that is often text from the file (a config value, a
// tensor name). Before, a config's hidden_act of "\x1b[2J\x1b[31m..." cleared
// and coloured the terminal through "unsupported hidden_act '...'".
TEST(CliErrors, TextFromTheFileInAnErrorCannotDriveTheTerminal) {
  ScratchDir dir("error_escapes");
  const fs::path model = dir.file("model");
  fs::copy(modelDir("llama-tiny"), model, fs::copy_options::recursive);
  nlohmann::json config;
  {
    std::ifstream in(model / "config.json");
    in >> config;
  }
  config["hidden_act"] = "\x1b[2J\x1b[31mevil\x07";
  {
    std::ofstream out(model / "config.json");
    out << config.dump();
  }
  const CliResult r = runCli({"run", "--target", model.string(), "--drafter", model.string(), "--prompt-ids", "1,2",
                              "--max-new", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("unsupported hidden_act"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("\\x1b[2J\\x1b[31mevil\\x07"), std::string::npos) << "shown escaped, not dropped: " << r.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
