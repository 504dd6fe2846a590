// kvscope-cli COMMAND --help (and -h) prints that command's usage, naming
// every option the command reads, and exits 0 before reading any (so a
// required option's absence is no error); `kvscope-cli --help` lists every
// command. run, check, make-model and export-gguf print no JSON without
// --json, and their JSON with it. `kvscope --help` (the GUI) answers without
// a display.
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

// What each command reads (app/cli/cmd_*.cpp, session_setup.cpp,
// cli_common.cpp): its help must name every one.
const std::vector<std::string> kRunOptions = {
    "--target", "--drafter", "--ngram", "--prompt", "--prompt-ids", "--gamma", "--adaptive", "--max-new",
    "--cache", "--greedy", "--temperature", "--top-k", "--top-p", "--seed", "--bookkeeping", "--ignore-eos",
    "--fault", "--trace-budget", "--evict", "--weights", "--prompts", "--cache-layout", "--json"};

std::map<std::string, std::vector<std::string>> expectedOptions() {
  std::map<std::string, std::vector<std::string>> o = {
      {"acceptance", {"--target", "--drafter", "--prompts", "--prompt", "--gamma", "--max-new", "--weights", "--json"}},
      {"audit", {"--fault", "--at-round", "--phase", "--row", "--layer", "--cache-of-row", "--sequence", "--json"}},
      {"bench", {"--target", "--drafter", "--quick", "--trials", "--warmup", "--new-tokens", "--contexts",
                 "--uncached-max-context", "--gammas", "--bound-context", "--prefill-rows", "--budget-ms", "--prompt",
                 "--prompt-ids", "--threads", "--weights", "--plot", "--json"}},
      {"check", {"--target", "--drafter", "--require-model", "--weights", "--json"}},
      {"compress", {"--model", "--prompt", "--prompt-ids", "--continuation", "--continuation-ids", "--text-file",
                    "--max-new", "--policy", "--budget", "--budget-rows", "--sinks", "--window", "--kernel", "--seed",
                    "--demote", "--element", "--prune", "--k-sparsity", "--v-sparsity", "--score", "--dense-window",
                    "--gamma", "--draft-cache", "--sweep", "--drafter", "--weights", "--json"}},
      {"detokenize", {"--model", "--ids", "--json"}},
      {"diff", {"--fault", "--mode", "--noise-tolerance", "--json"}},
      {"explain", {"--model", "--prompt", "--prompt-ids", "--layer", "--head", "--position", "--weights", "--drop-rows",
                   "--zero-k-channels", "--zero-v-channels", "--zero-rows", "--json"}},
      {"export-gguf", {"--model", "--out", "--dtype", "--json"}},
      {"faults", {"--json"}},
      {"generate", {"--model", "--prompt", "--prompt-ids", "--max-new", "--cache", "--weights", "--ignore-eos", "--greedy",
                    "--temperature", "--top-k", "--top-p", "--seed", "--json"}},
      {"import-llamacpp", {"--out", "--json"}},
      {"inspect", {"--weights", "--json"}},
      {"logits", {"--model", "--ids", "--mode", "--weights", "--json"}},
      {"make-model", {"--shape", "--out", "--dtype", "--seed", "--json"}},
      {"run", {"--trace", "--capture", "--no-baseline", "--speedup-trials", "--drafter-compressed", "--draft-cache"}},
      {"tokenize", {"--model", "--text", "--text-file", "--json"}},
      {"trace", {"--json"}},
      {"train", {"--corpus", "--arch-config", "--steps", "--out", "--resume", "--tokenizer", "--vocab", "--seq-len",
                 "--batch", "--lr", "--warmup", "--min-lr-ratio", "--weight-decay", "--grad-clip", "--eval-every",
                 "--eval-windows", "--checkpoint-every", "--checkpoint-dir", "--log-every", "--teacher", "--distill",
                 "--distill-temperature", "--init-from", "--dtype", "--threads", "--seed", "--weights", "--json"}},
      {"train-tokenizer", {"--corpus", "--vocab", "--out", "--min-pair-count", "--bos-token", "--eos-token", "--json"}},
  };
  // run, diff and audit share the session's options.
  for (const char* shared : {"run", "diff", "audit"}) o[shared].insert(o[shared].end(), kRunOptions.begin(), kRunOptions.end());
  return o;
}

// An option named as a whole word ("--seed", not the start of "--seed-x").
bool names(const std::string& text, const std::string& option) {
  for (size_t at = text.find(option); at != std::string::npos; at = text.find(option, at + 1)) {
    const size_t end = at + option.size();
    if (end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-')) return true;
  }
  return false;
}

// A line of stdout that parses as JSON (an object or an array).
bool hasJsonLine(const CliResult& r) {
  for (const std::string& line : r.stdoutLines()) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() || j.is_array()) return true;
  }
  return false;
}

TEST(CliHelp, TheListNamesEveryCommand) {
  const CliResult r = runCli({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& [command, options] : expectedOptions()) {
    EXPECT_NE(r.out.find("\n  " + command + " "), std::string::npos) << command << "\n" << r.out;
  }
}

TEST(CliHelp, EveryCommandsHelpNamesEveryOptionItReads) {
  for (const auto& [command, options] : expectedOptions()) {
    for (const std::string help : {"--help", "-h"}) {
      const CliResult r = runCli({command, help});
      EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
      EXPECT_EQ(r.out.rfind("usage: kvscope-cli " + command + " ", 0), 0u) << r.describe();
      EXPECT_EQ(r.err, "") << r.describe();
      for (const std::string& option : options) EXPECT_TRUE(names(r.out, option)) << command << " " << help << ": no " << option << "\n" << r.out;
    }
  }
  // Help wins over what the command would refuse: a missing required option, an unknown one.
  const CliResult r = runCli({"make-model", "--bogus", "1", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.rfind("usage: kvscope-cli make-model ", 0), 0u) << r.describe();
  // `kvscope-cli help COMMAND` says the same.
  EXPECT_EQ(runCli({"help", "check"}).out, runCli({"check", "--help"}).out);
}

TEST(CliHelp, RunCheckMakeModelAndExportGgufPrintJsonOnlyWithJson) {
  ScratchDir dir("json_only_with_json");
  const std::string model = dir.file("model");
  const std::vector<std::string> make = {"make-model", "--shape", "bundled-drafter", "--dtype", "f32", "--out", model};
  const std::vector<std::string> run = {"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                                        "--prompt", "Once upon a time", "--max-new", "6", "--gamma", "2", "--ignore-eos",
                                        "--no-baseline", "--capture", dir.file("run.kvcapture")};
  const std::vector<std::string> self = {"run", "--target", modelDir("llama-tiny"), "--drafter-compressed", "h2o:0.25",
                                         "--prompt-ids", "5,17,300,42,8,99,250,13,64,7,11,400,23,5,77,120,9,31,2,18,44,61",
                                         "--max-new", "4", "--gamma", "3", "--ignore-eos", "--no-baseline"};
  const std::vector<std::string> check = {"check", dir.file("run.kvcapture")};
  const std::vector<std::string> gguf = {"export-gguf", "--model", modelDir("llama-tiny-draft"), "--out", dir.file("d.gguf")};
  for (const auto& args : {make, run, self, check, gguf}) {
    const CliResult text = runCli(args);
    ASSERT_TRUE(text.exited && text.exit_code == 0) << text.describe();
    EXPECT_FALSE(text.out.empty()) << text.describe();  // the report
    EXPECT_FALSE(hasJsonLine(text)) << text.describe();
    std::vector<std::string> with_json = args;
    with_json.push_back("--json");
    const CliResult json = runCli(with_json);
    ASSERT_TRUE(json.exited && json.exit_code == 0) << json.describe();
    EXPECT_TRUE(json.lastJson().is_object()) << json.describe();
  }
}

TEST(GuiHelp, AnswersWithoutADisplay) {
#ifndef KVSCOPE_GUI
  GTEST_SKIP() << "built without the GUI";
#else
  // No display of any kind: QApplication would abort here.
  const std::string command = "env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " + shellQuote(KVSCOPE_GUI) + " --help 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  for (const char* part : {"Usage: ", "--lesson", "--workspace", "--help"}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << "\n" << out;
  }
#endif
}

}  // namespace
}  // namespace kvscope::cli_test
