// kvscope-cli COMMAND --help (and -h) prints that command's usage, naming
// every option the command reads, and exits 0 before reading any (so a
// required option's absence is no error); `kvscope-cli --help` lists every
// command. Every command prints for people without --json (no line of stdout
// is JSON) and its JSON result with it, with the same exit code. The commands
// are the ones `kvscope-cli --help` lists (the registry's), so a command added
// without its options and a cheap invocation here fails these tests. `kvscope
// --help` (the GUI) answers without a display.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_test_support.h"
#include "tests/cli/llamacpp_log.h"

namespace kvscope::cli_test {
namespace {

// What each command reads (app/cli/cmd_*.cpp, session_setup.cpp,
// cli_common.cpp): its help must name every one.
const std::vector<std::string> kRunOptions = {
    "--target", "--drafter", "--ngram", "--prompt", "--prompt-ids", "--gamma", "--adaptive", "--max-new",
    "--cache", "--greedy", "--temperature", "--top-k", "--top-p", "--seed", "--bookkeeping", "--ignore-eos",
    "--fault", "--trace-budget", "--evict", "--weights", "--prompts", "--cache-layout", "--batch-layout",
    "--json"};

std::map<std::string, std::vector<std::string>> expectedOptions() {
  std::map<std::string, std::vector<std::string>> o = {
      {"acceptance", {"--target", "--drafter", "--prompts", "--prompt", "--gamma", "--max-new", "--weights", "--json"}},
      {"audit", {"--fault", "--at-round", "--phase", "--row", "--layer", "--cache-of-row", "--sequence", "--json"}},
      {"bench", {"--target", "--drafter", "--quick", "--trials", "--warmup", "--new-tokens", "--contexts",
                 "--uncached-max-context", "--gammas", "--bound-context", "--prefill-rows", "--budget-ms", "--prompt",
                 "--prompt-ids", "--threads", "--weights", "--plot", "--json"}},
      {"bench-batch", {"--target", "--drafter", "--ngram", "--batches", "--new-tokens", "--gamma", "--trials",
                       "--threads", "--weights", "--json"}},
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

// The commands `kvscope-cli --help` lists: under "commands:", each usage's
// first line is two spaces and the command's name (continuation lines are
// indented further), up to the blank line.
std::vector<std::string> listedCommands() {
  const CliResult r = runCli({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> commands;
  std::istringstream in(r.out.substr(std::min(r.out.size(), r.out.find("\ncommands:\n") + 1)));
  std::string line;
  std::getline(in, line);  // "commands:"
  while (std::getline(in, line) && !line.empty()) {
    if (line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ') {
      commands.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  EXPECT_GE(commands.size(), 2u) << r.out;
  return commands;
}

TEST(CliHelp, TheListNamesEveryCommandAndOnlyThose) {
  const std::vector<std::string> listed = listedCommands();
  const auto expected = expectedOptions();
  for (const std::string& command : listed) {
    EXPECT_TRUE(expected.count(command)) << command << ": listed by --help, but this test does not know its options";
  }
  for (const auto& [command, options] : expected) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), command), listed.end()) << command << ": not listed by --help";
  }
}

TEST(CliHelp, EveryCommandsHelpNamesEveryOptionItReads) {
  const auto expected = expectedOptions();
  for (const std::string& command : listedCommands()) {
    const auto options = expected.find(command);
    for (const std::string help : {"--help", "-h"}) {
      const CliResult r = runCli({command, help});
      EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
      EXPECT_EQ(r.out.rfind("usage: kvscope-cli " + command + " ", 0), 0u) << r.describe();
      EXPECT_EQ(r.err, "") << r.describe();
      EXPECT_TRUE(names(r.out, "--json")) << command << " " << help << ": every command takes --json\n" << r.out;
      if (options == expected.end()) continue;  // TheListNamesEveryCommandAndOnlyThose names it
      for (const std::string& option : options->second) {
        EXPECT_TRUE(names(r.out, option)) << command << " " << help << ": no " << option << "\n" << r.out;
      }
    }
  }
  // Help wins over what the command would refuse: a missing required option, an unknown one.
  const CliResult r = runCli({"make-model", "--bogus", "1", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.rfind("usage: kvscope-cli make-model ", 0), 0u) << r.describe();
  // `kvscope-cli help COMMAND` says the same.
  EXPECT_EQ(runCli({"help", "check"}).out, runCli({"check", "--help"}).out);
}

// One cheap run of a command (the bundled models, a few tokens) and the exit
// code it must give, with or without --json.
struct Invocation {
  std::vector<std::string> args;
  int exit_code = 0;
};

const char* kPromptText = "In the beginning God created the heaven and the earth.";

// The bundled models (resources/models/ROLE), which commands use by default.
std::string bundledModel(const std::string& role) {
  return (fixturesDir().parent_path().parent_path() / "resources" / "models" / role).string();
}

// The inputs some commands read, made once in `dir`: a capture and a trace of
// a short run of the bundled pair, and a corpus.
void writeInputs(const ScratchDir& dir) {
  const CliResult ran = runCli({"run", "--prompt", kPromptText, "--max-new", "4", "--gamma", "2", "--no-baseline",
                                "--capture", dir.file("run.kvcapture"), "--trace", dir.file("run.kvtrace")});
  ASSERT_EQ(ran.exit_code, 0) << ran.describe();
  std::ofstream corpus(dir.file("corpus.txt"));
  for (int i = 0; i < 40; ++i) corpus << "And God said, Let there be light: and there was light " << i << ".\n";
}

std::map<std::string, std::vector<Invocation>> cheapInvocations(const ScratchDir& dir) {
  const std::vector<std::string> session = {"--prompt", kPromptText, "--max-new", "4", "--gamma", "2", "--ignore-eos"};
  // The bundled pair rejects a draft in round 1 here, which prune-short then keeps: exit 1.
  const std::vector<std::string> broken = {"--prompt", "And the LORD spake unto Moses, saying,", "--max-new", "8",
                                           "--gamma", "4", "--ignore-eos", "--fault", "prune-short"};
  auto with = [](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  const std::string target = bundledModel("target"), drafter = bundledModel("drafter");
  return {
      {"acceptance", {{{"acceptance", "--prompt", kPromptText, "--max-new", "4", "--gamma", "2"}}}},
      {"audit", {{with({"audit"}, session)}, {with({"audit"}, broken), 1}}},
      {"bench", {{{"bench", "--quick", "--drafter", "none", "--trials", "1", "--warmup", "0", "--new-tokens", "4"}}}},
      {"bench-batch", {{{"bench-batch", "--batches", "1,2", "--new-tokens", "2", "--trials", "1"}}}},
      {"check", {{{"check", dir.file("run.kvcapture")}}}},
      {"compress", {{{"compress", "--prompt", kPromptText, "--policy", "h2o", "--budget", "0.5", "--max-new", "2"}}}},
      {"detokenize", {{{"detokenize", "--ids", "458,268"}}}},
      {"diff", {{with({"diff"}, session)}, {with({"diff"}, broken), 1}}},
      {"explain", {{{"explain", "--prompt", kPromptText, "--layer", "0", "--head", "0"}}}},
      {"export-gguf", {{{"export-gguf", "--model", drafter, "--out", dir.file("d.gguf")}}}},
      {"faults", {{{"faults"}}}},
      {"generate", {{{"generate", "--prompt", kPromptText, "--max-new", "4"}}}},
      {"import-llamacpp", {{{"import-llamacpp", dir.file("log.json"), "--out", dir.file("imported.kvcapture")}}}},
      {"inspect", {{{"inspect", drafter}}}},
      {"logits", {{{"logits", "--ids", "5,17,300,42", "--mode", "cached"}}}},
      {"make-model", {{{"make-model", "--shape", "bundled-drafter", "--dtype", "f32", "--out", dir.file("model")}}}},
      {"run",
       {{with({"run", "--no-baseline"}, session)},
        {with({"run", "--no-baseline", "--prompt", "And the LORD spake"}, session)},  // a batch of two
        {{"run", "--target", target, "--drafter-compressed", "h2o:0.25", "--prompt", kPromptText, "--max-new", "4",
          "--gamma", "3", "--ignore-eos", "--no-baseline"}}}},
      {"tokenize", {{{"tokenize", "--text", kPromptText}}}},
      {"trace", {{{"trace", dir.file("run.kvtrace")}}}},
      {"train",
       {{{"train", "--corpus", dir.file("corpus.txt"), "--tokenizer", drafter, "--arch-config",
          R"({"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64})",
          "--steps", "2", "--seq-len", "16", "--batch", "2", "--eval-windows", "2", "--dtype", "f32", "--out",
          dir.file("trained")}}}},
      {"train-tokenizer", {{{"train-tokenizer", "--corpus", dir.file("corpus.txt"), "--vocab", "300", "--out",
                             dir.file("tokenizer")}}}},
  };
}

TEST(CliJson, EveryCommandPrintsJsonOnlyWithJson) {
  ScratchDir dir("json_only_with_json");
  writeInputs(dir);
  writeOneCallLog(dir);
  const auto invocations = cheapInvocations(dir);
  for (const std::string& command : listedCommands()) {
    const auto found = invocations.find(command);
    if (found == invocations.end()) {
      ADD_FAILURE() << command << ": listed by --help, but this test has no cheap invocation of it";
      continue;
    }
    for (const Invocation& invocation : found->second) {
      const CliResult text = runCli(invocation.args);
      ASSERT_TRUE(text.exited) << text.describe();
      EXPECT_EQ(text.exit_code, invocation.exit_code) << text.describe();
      EXPECT_FALSE(text.out.empty()) << "no report for people\n" << text.describe();
      EXPECT_FALSE(hasJsonLine(text)) << "JSON without --json\n" << text.describe();
      std::vector<std::string> with_json = invocation.args;
      with_json.push_back("--json");
      const CliResult json = runCli(with_json);
      ASSERT_TRUE(json.exited) << json.describe();
      EXPECT_EQ(json.exit_code, invocation.exit_code) << json.describe();
      EXPECT_TRUE(json.lastJson().is_object()) << "no JSON object on the last line with --json\n" << json.describe();
    }
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
