// kvscope-cli run --evict POLICY:BUDGET[:every=N], end to end: the
// run reports its Evict events, the trace it writes carries them (policy and
// masked rows, format version 3), budget 1.0 logs none and changes no token,
// the diff calls the drift an intended eviction (exit 0), and a bad --evict
// is refused with the option named.
#include <gtest/gtest.h>

#include "cli_test_support.h"

namespace kvscope::cli_test {
namespace {

const std::string kEvictPrompt = "Once upon a time there was a little fox who lived in the woods";

std::vector<std::string> evictRun(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--target", modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
                                   "--prompt", kEvictPrompt, "--gamma", "3", "--max-new", "12", "--greedy",
                                   "--ignore-eos", "--json", "--no-baseline"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(CliEvict, RunWritesTheEvictEventsToItsTrace) {
  ScratchDir dir("evict");
  const std::string path = dir.file("evict.kvtrace");
  const auto run = runJson(evictRun({"--evict", "h2o:0.3:every=2", "--trace", path}));
  ASSERT_TRUE(run.contains("eviction")) << run.dump();
  EXPECT_EQ(run["eviction"]["spec"], "h2o:0.3:every=2");
  const int64_t events = run["eviction"]["events"].get<int64_t>();
  EXPECT_GE(events, 2);  // after the prefill and at least one re-compression
  const auto doc = traceDocument(path);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["version"], 4);
  EXPECT_EQ(doc["info"]["options"]["eviction"], "h2o:0.3:every=2");
  int64_t in_trace = 0, masked = 0;
  for (const auto& e : doc["events"]) {
    if (!e.contains("policy")) continue;
    ++in_trace;
    EXPECT_EQ(e["operation"], "evict");
    EXPECT_EQ(e["policy"], "h2o");
    EXPECT_EQ(e["rows_before"], e["rows_after"]);
    const auto& m = e["masked"];
    ASSERT_EQ(m["entries"].size(), m["kv_heads"].size());
    ASSERT_EQ(m["entries"].size(), m["layers"].size());
    ASSERT_EQ(m["entries"].size(), m["scores"].size());
    masked += static_cast<int64_t>(m["entries"].size());
  }
  EXPECT_EQ(in_trace, events);
  EXPECT_EQ(masked, run["eviction"]["masked_rows"].get<int64_t>());
  // The trace reads back through the validating reader.
  const CliResult shown = runCli({"trace", path});
  EXPECT_TRUE(shown.exited && shown.exit_code == 0) << shown.describe();
}

TEST(CliEvict, FullBudgetLogsNothingAndChangesNoToken) {
  const auto plain = runJson(evictRun({}));
  const auto full = runJson(evictRun({"--evict", "snapkv:1.0:every=1"}));
  EXPECT_EQ(full["ids"], plain["ids"]);
  EXPECT_EQ(full["eviction"]["events"], 0);
  EXPECT_FALSE(plain.contains("eviction"));
}

TEST(CliEvict, DiffCallsItAnIntendedEviction) {
  std::vector<std::string> args = evictRun({"--evict", "streaming:4:sinks=1"});
  args[0] = "diff";
  args.erase(std::find(args.begin(), args.end(), "--no-baseline"));
  const CliResult r = runCli(args);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  EXPECT_TRUE(j["root_cause"].is_null()) << j.dump();
  ASSERT_TRUE(j.contains("eviction_cause")) << j.dump();
  EXPECT_EQ(j["eviction_cause"]["policy"], "streaming");
  EXPECT_NE(j["explanation"].get<std::string>().find("evicted by policy streaming at round 0"), std::string::npos);
}

TEST(CliEvict, BadEvictIsRefusedWithTheOptionNamed) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--evict", "h2o"}, {"--evict", "lru:0.5"}, {"--evict", "h2o:1.5"},
        {"--evict", "h2o:0.5:every=x"}, {"--evict", "h2o:0.5", "--cache", "off"}}) {
    const CliResult r = runCli(evictRun(extra));
    EXPECT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find("--evict"), std::string::npos) << r.describe();
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.describe();
  }
  // Sliding-window layers are refused, not silently mis-evicted.
  const CliResult sw = runCli({"run", "--target", modelDir("mistral-sw-tiny"), "--ngram", "2", "--prompt-ids",
                               "1,2,3,4,5", "--max-new", "4", "--evict", "h2o:0.5", "--no-baseline"});
  EXPECT_EQ(sw.exit_code, 2) << sw.describe();
  EXPECT_NE(sw.err.find("sliding-window"), std::string::npos) << sw.describe();
}

}  // namespace
}  // namespace kvscope::cli_test
