// The controller both front ends drive: a saved trace keeps the
// investigation (fault, prompt, diff report, root cause), an opened trace
// gives it back without the models, and audits at past moments never step.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/control/session_controller.h"
#include "core/error.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

ModelSpec fixturePair() {
  ModelSpec spec;
  spec.target_dir = std::string(KVSCOPE_FIXTURES) + "/models/llama-tiny";
  spec.drafter_dir = std::string(KVSCOPE_FIXTURES) + "/models/llama-tiny-draft";
  return spec;
}

SessionSpec faulty(const std::string& fault) {
  SessionSpec spec;
  spec.prompt = "Once upon a time";
  spec.options.max_new_tokens = 24;
  spec.options.ignore_eos = true;
  spec.options.fault = parseFault(fault);
  return spec;
}

TEST(SessionController, TraceKeepsTheInvestigation) {
  SessionController controller;
  controller.loadModels(fixturePair());
  std::atomic<bool> cancel{false};
  const DiffReport& report = controller.runDiff(faulty("partial-layer-crop"), cancel);
  ASSERT_TRUE(report.root_cause.has_value());
  const std::string what = report.root_cause->what;
  const fs::path path = fs::temp_directory_path() / ("kvscope_controller_" + std::to_string(::getpid()) + ".kvtrace");
  controller.saveTrace(path.string(), R"({"cursor": {"round": 2, "phase": "verify", "layer": 1, "row": 11}})");

  SessionController reader;  // no models at all
  std::string gui;
  const auto snapshot = reader.openTrace(path.string(), &gui);
  fs::remove(path);
  ASSERT_TRUE(snapshot != nullptr);
  EXPECT_TRUE(snapshot->replay_only);
  EXPECT_EQ(snapshot->fault, "partial-layer-crop");
  EXPECT_EQ(snapshot->prompt, "Once upon a time");
  ASSERT_TRUE(snapshot->diff != nullptr);
  ASSERT_TRUE(snapshot->diff->root_cause.has_value());
  EXPECT_EQ(snapshot->diff->root_cause->what, what);
  EXPECT_EQ(snapshot->diff->root_cause->layers, report.root_cause->layers);
  EXPECT_EQ(snapshot->diff->divergent, report.divergent);
  EXPECT_NE(gui.find("\"layer\":1"), std::string::npos) << gui;
  // The rows and events came back too: the root cause is found again from
  // the record alone, and audits of past moments work on identities.
  ASSERT_TRUE(reader.rootCause().has_value());
  EXPECT_EQ(reader.rootCause()->event_index, report.root_cause->event_index);
  const auto audits = reader.auditAt(report.root_cause->moment());
  ASSERT_FALSE(audits.empty());
  EXPECT_FALSE(audits[0].values_checked);
  EXPECT_FALSE(audits[0].clean());
}

TEST(SessionController, AuditAtAPastMomentDoesNotStep) {
  SessionController controller;
  controller.loadModels(fixturePair());
  controller.startSession(faulty("prune-short"));
  controller.runToEnd();
  const auto before = controller.snapshot();
  const auto audits = controller.auditAt({1, Phase::Prune});
  const auto after = controller.snapshot();
  EXPECT_EQ(before->rounds.size(), after->rounds.size());
  EXPECT_EQ(before->entries.size(), after->entries.size());
  ASSERT_TRUE(after->audit_target != nullptr);
  EXPECT_EQ(after->audit_target->moment.round, 1);
  EXPECT_EQ(after->audit_target->moment.phase, Phase::Prune);
  EXPECT_TRUE(audits[0].values_checked);
  EXPECT_THROW(controller.auditAt({999, Phase::Draft}), Error);
}

}  // namespace
}  // namespace kvscope
