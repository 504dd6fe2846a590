// kvscope-cli run, end to end: the --json output (one line per round and a
// final object), greedy runs equal to `generate --greedy` and to Hugging
// Face's reference, --trace, and clean refusals of bad arguments.
#include <fstream>
#include <gtest/gtest.h>

#include "cli_test_support.h"
#include "core/decode/session_options.h"

namespace kvscope::cli_test {
namespace {

const std::string kPrompt = "Once upon a time";

std::vector<std::string> runArgs(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--target", modelDir("llama-tiny"), "--json", "--no-baseline"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(CliRun, JsonHasRoundLinesAndTheFinalObject) {
  CliResult full;
  const auto result = runJson(runArgs({"--drafter", modelDir("llama-tiny-draft"), "--prompt", kPrompt, "--gamma", "3",
                                       "--max-new", "14", "--temperature", "0.9", "--seed", "5", "--ignore-eos"}),
                              &full);
  for (const char* key :
       {"ids", "text", "rounds", "alpha", "mean_accepted_length", "target_calls", "drafter_calls", "prompt_ids"}) {
    EXPECT_TRUE(result.contains(key)) << "missing '" << key << "' in " << result.dump();
  }
  const auto ids = result["ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(ids.size(), 14u);
  const int64_t rounds = result["rounds"].get<int64_t>();
  ASSERT_GT(rounds, 0);

  // Every line before the last is one round, in order; their emitted tokens
  // are the ids, and their counts add up to the summary.
  const auto lines = full.stdoutLines();
  ASSERT_EQ(static_cast<int64_t>(lines.size()), rounds + 1) << full.describe();
  std::vector<int64_t> emitted;
  int64_t drafted = 0, accepted = 0, target_calls = 0, drafter_calls = 0;
  for (int64_t i = 0; i < rounds; ++i) {
    const auto round = nlohmann::json::parse(lines[static_cast<size_t>(i)], nullptr, false);
    ASSERT_TRUE(round.is_object()) << "line " << i << ": " << lines[static_cast<size_t>(i)];
    EXPECT_EQ(round["round"].get<int64_t>(), i + 1);
    const auto e = round["emitted"].get<std::vector<int64_t>>();
    emitted.insert(emitted.end(), e.begin(), e.end());
    const auto drafts = round["drafts"].get<std::vector<int64_t>>();
    drafted += static_cast<int64_t>(drafts.size());
    accepted += round["accepted"].get<int64_t>();
    target_calls += round["target_forwards"].get<int64_t>();
    drafter_calls += round["drafter_forwards"].get<int64_t>();
    EXPECT_EQ(round["q"].size(), drafts.size());
    EXPECT_EQ(round["p"].size(), drafts.size());
    EXPECT_GE(round["uniforms"].size(), std::min<size_t>(drafts.size(), 1));
  }
  EXPECT_EQ(emitted, ids);
  EXPECT_EQ(result["drafted"].get<int64_t>(), drafted);
  EXPECT_EQ(result["accepted"].get<int64_t>(), accepted);
  // The prefill forwards are not a round: one more call each in the summary.
  EXPECT_EQ(result["target_calls"].get<int64_t>(), target_calls + 1);
  EXPECT_EQ(result["drafter_calls"].get<int64_t>(), drafter_calls + 1);
  EXPECT_DOUBLE_EQ(result["alpha"].get<double>(), static_cast<double>(accepted) / static_cast<double>(drafted));
  EXPECT_DOUBLE_EQ(result["mean_accepted_length"].get<double>(), 14.0 / static_cast<double>(rounds));

  // text is the detokenized ids.
  const auto text = runJson({"detokenize", "--model", modelDir("llama-tiny"), "--ids", joinIds(ids), "--json"});
  EXPECT_EQ(result["text"], text["text"]);
  // The same seed gives the same run, with the cache off too.
  const auto again = runJson(runArgs({"--drafter", modelDir("llama-tiny-draft"), "--prompt", kPrompt, "--gamma", "3",
                                      "--max-new", "14", "--temperature", "0.9", "--seed", "5", "--ignore-eos",
                                      "--cache", "off"}));
  EXPECT_EQ(again["ids"], result["ids"]);
}

TEST(CliRun, GreedyRunEqualsGenerateGreedy) {
  const std::vector<std::vector<std::string>> prompts = {{"--prompt", kPrompt},
                                                         {"--prompt-ids", "1,300,42,17,99,5"},
                                                         {"--prompt", "The licenses for most software"}};
  for (const auto& prompt : prompts) {
    std::vector<std::string> gen = {"generate", "--model", modelDir("llama-tiny"), "--greedy", "--max-new", "20",
                                    "--json"};
    gen.insert(gen.end(), prompt.begin(), prompt.end());
    const auto reference = runJson(gen);
    ASSERT_TRUE(reference.contains("ids"));
    for (const std::vector<std::string>& variant :
         {std::vector<std::string>{"--drafter", modelDir("llama-tiny-draft"), "--gamma", "4"},
          std::vector<std::string>{"--drafter", modelDir("llama-tiny-draft"), "--gamma", "2", "--cache", "off"},
          std::vector<std::string>{"--ngram", "3", "--gamma", "8"},
          std::vector<std::string>{"--drafter", modelDir("llama-tiny-draft"), "--adaptive", "--bookkeeping", "seed"}}) {
      std::vector<std::string> extra = variant;
      extra.insert(extra.end(), {"--greedy", "--max-new", "20"});
      extra.insert(extra.end(), prompt.begin(), prompt.end());
      const auto run = runJson(runArgs(extra));
      EXPECT_EQ(run["ids"], reference["ids"]) << prompt.back() << " " << nlohmann::json(variant).dump();
      EXPECT_EQ(run["text"], reference["text"]);
      EXPECT_EQ(run["prompt_ids"], reference["prompt_ids"]);
    }
  }
}

TEST(CliRun, GeneratePromptsFileEqualsEachPromptAlone) {
  ScratchDir dir("generate_prompts");
  const std::vector<std::string> texts = {kPrompt, "The licenses for most software", "In the beginning"};
  {
    std::ofstream file(dir.file("prompts.txt"));
    file << texts[0] << "\n\n" << texts[1] << "\r\n" << texts[2] << "\n";  // a blank line and a CRLF line
  }
  const std::vector<std::string> common = {"generate", "--model", modelDir("llama-tiny"), "--greedy", "--max-new", "12",
                                           "--json"};
  std::vector<std::string> all = common;
  all.insert(all.end(), {"--prompts", dir.file("prompts.txt")});
  const auto together = runJson(all);
  ASSERT_TRUE(together.contains("generations")) << together.dump();
  ASSERT_EQ(together["generations"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<std::string> one = common;
    one.insert(one.end(), {"--prompt", texts[i]});
    const auto alone = runJson(one);
    EXPECT_EQ(together["generations"][i]["ids"], alone["ids"]) << texts[i];
    EXPECT_EQ(together["generations"][i]["prompt_ids"], alone["prompt_ids"]) << texts[i];
  }
  // Text mode: one line per prompt, the prompt then its continuation.
  std::vector<std::string> plain = {"generate", "--model", modelDir("llama-tiny"), "--greedy", "--max-new", "4",
                                    "--prompts", dir.file("prompts.txt")};
  const CliResult text = runCli(plain);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.describe();
  EXPECT_NE(text.out.find(texts[1]), std::string::npos) << text.out;

  {
    std::ofstream empty(dir.file("blank.txt"));
    empty << "\n  \n";
  }
  std::vector<std::string> bad = common;
  bad.insert(bad.end(), {"--prompts", dir.file("blank.txt")});
  const CliResult refused = runCli(bad);
  EXPECT_TRUE(refused.exited && refused.exit_code != 0) << refused.describe();
  EXPECT_NE(refused.err.find("no prompt in it"), std::string::npos) << refused.err;
  bad.insert(bad.end(), {"--prompt", kPrompt});
  const CliResult both = runCli(bad);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

TEST(CliRun, GreedyRunMatchesTheHuggingFaceFixture) {
  const auto doc = readJson(fixturesDir() / "greedy" / "llama-tiny+llama-tiny-draft.json");
  for (const auto& c : doc["cases"]) {
    const auto run = runJson(runArgs({"--drafter", modelDir("llama-tiny-draft"), "--prompt-ids",
                                      joinIds(c["ids"].get<std::vector<int64_t>>()), "--gamma", "4", "--max-new", "48",
                                      "--greedy", "--ignore-eos"}));
    EXPECT_EQ(run["ids"], c["generated"]);
    EXPECT_EQ(run["rounds"], c["num_rounds"]);
    EXPECT_EQ(run["drafted"], c["drafted_total"]);
    EXPECT_EQ(run["accepted"], c["accepted_total"]);
    // HF's counts plus our prefill forward (the prompt has more than one token).
    EXPECT_EQ(run["target_calls"].get<int64_t>(), c["assisted_target_forward_calls"].get<int64_t>() + 1);
    EXPECT_EQ(run["drafter_calls"].get<int64_t>(), c["drafted_total"].get<int64_t>() + 1);
    // The prompt text through the CLI's tokenizer gives the same run.
    const auto by_text = runJson(runArgs({"--drafter", modelDir("llama-tiny-draft"), "--prompt",
                                          c["prompt_text"].get<std::string>(), "--gamma", "4", "--max-new", "48",
                                          "--greedy", "--ignore-eos"}));
    EXPECT_EQ(by_text["prompt_ids"], c["ids"]);
    EXPECT_EQ(by_text["ids"], c["generated"]);
  }
}

TEST(CliRun, TraceIsWritten) {
  ScratchDir dir("trace");
  const std::string path = dir.file("run.kvtrace");
  const auto run = runJson(runArgs({"--drafter", modelDir("llama-tiny-draft"), "--prompt", kPrompt, "--gamma", "3",
                                    "--max-new", "10", "--temperature", "0.8", "--seed", "3", "--trace", path}));
  ASSERT_TRUE(fs::exists(path));
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 16u);
  // A safetensors file: 8-byte little-endian header length, then a JSON header
  // whose metadata holds the kvscope document.
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  ASSERT_LE(8 + header, bytes.size());
  const auto json = nlohmann::json::parse(bytes.substr(8, header), nullptr, false);
  ASSERT_TRUE(json.is_object());
  ASSERT_TRUE(json.contains("__metadata__"));
  const auto doc = nlohmann::json::parse(json["__metadata__"]["kvscope"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["format"], "kvscope-trace");
  EXPECT_EQ(doc["rounds"].size(), run["rounds"].get<size_t>() + 1);  // + the prefill
  EXPECT_TRUE(json.contains("ledger.target.k"));
  EXPECT_TRUE(json.contains("ledger.drafter.v"));
  // Without --json: the coloured text, the metrics and where the trace went.
  const std::string second = dir.file("second.kvtrace");
  const CliResult plain = runCli({"run", "--target", modelDir("llama-tiny"), "--ngram", "2", "--prompt", kPrompt,
                                  "--max-new", "6", "--trace", second});
  EXPECT_TRUE(plain.exited && plain.exit_code == 0) << plain.describe();
  EXPECT_NE(plain.out.find("trace written to"), std::string::npos) << plain.describe();
  EXPECT_TRUE(fs::exists(second));
}

// Options not given on the command line are SessionOptions' defaults (the
// one declaration the GUI and lessons use too), as the trace records them.
TEST(CliRun, OptionsNotGivenAreTheSessionDefaults) {
  ScratchDir dir("defaults");
  const std::string path = dir.file("defaults.kvtrace");
  const CliResult r = runCli({"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                              "--prompt", kPrompt, "--no-baseline", "--trace", path});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const nlohmann::json doc = traceDocument(path);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["info"]["options"], sessionOptionsJson(SessionOptions{}));
  // And what is given is what runs.
  const std::string given = dir.file("given.kvtrace");
  const CliResult g = runCli({"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                              "--prompt", kPrompt, "--no-baseline", "--gamma", "2", "--max-new", "5", "--bookkeeping",
                              "seed", "--fault", "prune-short", "--ignore-eos", "--trace", given});
  ASSERT_TRUE(g.exited && g.exit_code == 0) << g.describe();
  SessionOptions expected;
  expected.gamma = 2;
  expected.max_new_tokens = 5;
  expected.bookkeeping = Bookkeeping::Seed;
  expected.fault = Fault::PruneShort;
  expected.ignore_eos = true;
  EXPECT_EQ(traceDocument(given)["info"]["options"], sessionOptionsJson(expected));
}

struct BadRun {
  std::string name;
  std::vector<std::string> args;
  std::string message;  // expected in stderr
};

TEST(CliRun, BadArgumentsFailCleanly) {
  const std::string target = modelDir("llama-tiny");
  const std::string drafter = modelDir("llama-tiny-draft");
  const std::vector<BadRun> cases = {
      {"unknown option", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--bogus", "1"}, "--bogus"},
      {"bad cache value", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--cache", "maybe"}, "--cache"},
      {"missing prompt", {"run", "--target", target, "--drafter", drafter}, "prompt"},
      {"no such model", {"run", "--target", "/nonexistent/model/dir", "--ngram", "2", "--prompt", "a"},
       "/nonexistent/model/dir"},
      {"negative gamma", {"run", "--target", target, "--drafter", drafter, "--prompt", "a", "--gamma", "-1"}, "gamma"},
      {"gamma not a number", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--gamma", "four"}, "--gamma"},
      {"temperature 0", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--temperature", "0"}, "temperature"},
      {"top-p 1.5", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--top-p", "1.5"}, "top-p"},
      {"greedy and temperature", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--greedy", "--temperature", "0.5"},
       "--greedy"},
      {"both drafters", {"run", "--target", target, "--drafter", drafter, "--ngram", "2", "--prompt", "a"}, "--ngram"},
      {"bad bookkeeping", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--bookkeeping", "lazy"}, "bookkeeping"},
      {"other vocabulary", {"run", "--target", target, "--drafter", modelDir("qwen2-tiny"), "--prompt", "a"}, "vocabulary"},
      {"beyond the context", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--max-new", "300"}, "context length"},
      {"bad prompt ids", {"run", "--target", target, "--ngram", "2", "--prompt-ids", "1,x,3"}, "prompt-ids"},
      {"option without value", {"run", "--target", target, "--ngram", "2", "--prompt", "a", "--gamma"}, "--gamma"},
      {"unknown command", {"frobnicate"}, "unknown command"},
  };
  for (const BadRun& c : cases) {
    const CliResult r = runCli(c.args);
    EXPECT_TRUE(r.exited) << c.name << ": killed by a signal\n" << r.describe();
    EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.name << ": stderr lacks '" << c.message << "'\n"
                                                        << r.describe();
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c.name << "\n" << r.describe();
  }
}

}  // namespace
}  // namespace kvscope::cli_test
