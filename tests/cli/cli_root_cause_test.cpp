// kvscope-cli diff / audit / faults, end to end: the JSON contracts docs/cli.md describes
// (root_cause in diff, audit of a recorded moment, faults with explanations).
#include "tests/cli/cli_test_support.h"

namespace kvscope::cli_test {
namespace {

std::vector<std::string> fixtureRun(const std::string& command, const std::string& fault) {
  return {command,  "--target",   modelDir("llama-tiny"), "--drafter", modelDir("llama-tiny-draft"),
          "--prompt", "Once upon a time", "--gamma", "4", "--max-new", "24", "--ignore-eos", "--fault", fault, "--json"};
}

TEST(CliRootCause, DiffJsonNamesTheRootCause) {
  const CliResult r = runCli(fixtureRun("diff", "prune-short"));
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  ASSERT_TRUE(j["root_cause"].is_object()) << r.describe();
  const auto& c = j["root_cause"];
  EXPECT_EQ(c["cache"], "target");
  EXPECT_EQ(c["round"], 1);
  EXPECT_EQ(c["phase"], "prune");
  EXPECT_EQ(c["operation"], "crop");
  EXPECT_EQ(c["actual_rows"].get<int64_t>(), c["expected_rows"].get<int64_t>() + 1);
  EXPECT_EQ(c["rows"], nlohmann::json::array({c["expected_rows"]}));
  EXPECT_FALSE(c["layers"].empty());
  EXPECT_NE(j["explanation"].get<std::string>().find("because round 1's target prune"), std::string::npos)
      << j["explanation"];
}

TEST(CliRootCause, DiffWithoutFaultHasNoRootCause) {
  const auto j = runJson(fixtureRun("diff", "none"));
  EXPECT_TRUE(j["root_cause"].is_null());
  EXPECT_TRUE(j["first_divergence"].is_null());
  EXPECT_EQ(j["failed"], false);
}

TEST(CliRootCause, AuditOfARecordedMoment) {
  // Just after round 1's verify every row is right; after its prune, one is stale.
  auto args = fixtureRun("audit", "prune-short");
  args.insert(args.end(), {"--at-round", "1", "--phase", "verify"});
  const auto clean = runJson(args);
  EXPECT_EQ(clean["ok"], true);
  EXPECT_EQ(clean["rows"].size(), 0u);
  EXPECT_GT(clean["ok_rows"].get<int64_t>(), 0);

  args = fixtureRun("audit", "prune-short");
  args.insert(args.end(), {"--at-round", "1", "--phase", "prune"});
  const CliResult r = runCli(args);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto bad = r.lastJson();
  ASSERT_TRUE(bad.is_object()) << r.describe();
  EXPECT_EQ(bad["ok"], false);
  ASSERT_FALSE(bad["rows"].empty());
  const auto& row = bad["rows"][0];
  for (const char* key : {"cache", "layer", "row", "position", "token", "state", "max_abs_dk", "max_abs_dv"}) {
    EXPECT_TRUE(row.contains(key)) << key;
  }
  EXPECT_EQ(row["state"], "stale");
  EXPECT_EQ(row["cache"], "target");
}

TEST(CliRootCause, RowHistoryListsTheOperationsThatTouchedIt) {
  // Under prune-short the rejected draft's row survives round 1's prune.
  auto args = fixtureRun("audit", "prune-short");
  args.insert(args.end(), {"--at-round", "1", "--phase", "prune", "--row", "11", "--layer", "0"});
  const CliResult r = runCli(args);
  const auto j = r.lastJson();
  ASSERT_TRUE(j.is_object()) << r.describe();
  const auto& events = j["history"]["events"];
  ASSERT_GE(events.size(), 2u) << j.dump();
  EXPECT_EQ(events[0]["operation"], "append");
  EXPECT_EQ(events[0]["round"], 1);
  EXPECT_EQ(events[0]["row_after"], 11);
  EXPECT_EQ(events[1]["operation"], "crop");
  EXPECT_EQ(events[1]["phase"], "prune");
  EXPECT_EQ(events[1]["row_after"], 11);  // kept: the contract required 11 rows (0..10)
  EXPECT_EQ(events[1]["fault_action"], "removed one row too few");
  // The one row history (core/audit/row_history) gives the verdict the GUI shows.
  EXPECT_EQ(events[0]["state"], "ok");
  EXPECT_EQ(events[1]["effect"], "kept");
  EXPECT_EQ(events[1]["state"], "stale");
}

TEST(CliRootCause, AuditRefusesAMomentNotRecorded) {
  auto args = fixtureRun("audit", "none");
  args.insert(args.end(), {"--at-round", "999"});
  const CliResult r = runCli(args);
  EXPECT_TRUE(r.exited) << r.describe();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("has not been recorded"), std::string::npos) << r.describe();
}

TEST(CliRootCause, FaultsJsonListsExplanationsAndWhatTheyMirror) {
  const auto j = runJson({"faults", "--json"});
  ASSERT_TRUE(j["faults"].is_array());
  EXPECT_EQ(j["faults"].size(), 18u);
  std::vector<std::string> names;
  for (const auto& f : j["faults"]) {
    names.push_back(f["name"]);
    EXPECT_FALSE(f["explanation"].get<std::string>().empty());
    EXPECT_FALSE(f["mirrors"].get<std::string>().empty());
    EXPECT_EQ(f["needs_paged_cache"].get<bool>(), f["name"] == "freed-block-reused") << f["name"];
    EXPECT_EQ(f["needs_padded_batch"].get<bool>(), f["name"] == "padding-mask-dropped") << f["name"];
  }
  for (const char* name : {"bonus-not-fed", "verify-mask-leak", "append-reversed", "window-roll-early", "freed-block-reused",
                           "padding-mask-dropped"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

}  // namespace
}  // namespace kvscope::cli_test
