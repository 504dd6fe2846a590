// The capture checker on the fixture captures (tests/fixtures/captures): the
// timeline it builds (every row's identity from the call that wrote it) and
// its verdicts, with and without reference models. The buggy loops in every
// cache shape are checked end to end by tests/python/check_captures.py.
#include <gtest/gtest.h>

#include "core/check/capture_check.h"
#include "core/check/capture_models.h"
#include "core/check/capture_timeline.h"
#include "tests/core/session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::fixturesDir;

std::shared_ptr<const CaptureFile> fixtureCapture(const std::string& name) {
  return CaptureFile::open((fixturesDir() / "captures" / name).string());
}

CaptureCheckReport checkWith(const CaptureFile& file, const CausalLM* target, const CausalLM* drafter = nullptr) {
  CaptureCheckOptions options;
  options.models = {target, drafter};
  const CaptureTimeline timeline = buildCaptureTimeline(file);
  return checkCapture(file, timeline, captureRecordView(timeline), options);
}

TEST(CaptureTimelineTest, EveryStaticRowIsTheInputThatWroteItAtItsPosition) {
  const auto file = fixtureCapture("greedy-static-full.kvcapture");
  const CaptureTimeline timeline = buildCaptureTimeline(*file);
  ASSERT_EQ(timeline.steps.size(), timeline.record.events.events().size());
  const auto& committed = timeline.record.sequence;
  ASSERT_FALSE(committed.empty());
  const CacheEvent& last = timeline.record.events.events().back();
  ASSERT_EQ(timeline.steps.back().operation, CaptureOperation::Forward);
  // Greedy decoding feeds each token once: the last call attends the whole
  // sequence but its newest token, each row at its own slot.
  const auto& rows = last.layout.front();
  ASSERT_EQ(static_cast<int64_t>(rows.size()), last.expected_rows);
  for (size_t r = 0; r < rows.size(); ++r) {
    const LedgerEntry& e = timeline.record.ledger.entry(rows[r]);
    EXPECT_EQ(e.position, static_cast<int64_t>(r));
    EXPECT_EQ(e.rope_position, e.position);
    EXPECT_EQ(e.token, committed[r]);
  }
}

TEST(CaptureTimelineTest, ChangesBetweenCallsAreDerivedFromTheStates) {
  const auto file = fixtureCapture("verify-mask-leak-dynamic-topk.kvcapture");
  const CaptureTimeline timeline = buildCaptureTimeline(*file);
  bool cropped = false;
  for (const CaptureStep& step : timeline.steps) {
    if (step.operation == CaptureOperation::Between && step.change == CaptureBetweenKind::Crop) cropped = true;
  }
  EXPECT_TRUE(cropped) << "the loop rolls both caches back with crop()";
}

TEST(CaptureCheckTest, StaticCacheGreedyRunIsClean) {
  const auto file = fixtureCapture("greedy-static-full.kvcapture");
  const CaptureCheckReport report = checkWith(*file, fixtureModel("llama-tiny").get());
  EXPECT_TRUE(report.ok()) << (report.root_cause ? report.root_cause->what : report.first_divergence->what);
  EXPECT_GT(report.rows_value_checked, 0);
  EXPECT_LT(report.max_value_error, 1e-4);
  EXPECT_GT(report.logit_rows_checked, 0);
}

TEST(CaptureCheckTest, SlidingWindowRingThatRollsOnceFullIsClean) {
  const auto file = fixtureCapture("greedy-ring-topk.kvcapture");
  const CaptureCheckReport report = checkWith(*file, fixtureModel("mistral-sw-tiny").get());
  EXPECT_TRUE(report.ok()) << (report.root_cause ? report.root_cause->what : report.first_divergence->what);
  EXPECT_GT(report.logit_rows_checked, 0);
}

TEST(CaptureCheckTest, VerifyWithoutCausalMaskIsNamedAtItsCall) {
  const auto file = fixtureCapture("verify-mask-leak-dynamic-topk.kvcapture");
  for (const bool with_models : {true, false}) {
    const CaptureCheckReport report =
        with_models ? checkWith(*file, fixtureModel("llama-tiny").get(), fixtureModel("llama-tiny-draft").get())
                    : checkWith(*file, nullptr, nullptr);
    ASSERT_TRUE(report.root_cause.has_value()) << "with models: " << with_models;
    EXPECT_EQ(report.root_cause->cache, CacheRole::Target);
    EXPECT_EQ(report.root_cause->call, 1);
    EXPECT_TRUE(report.root_cause->forward());
    EXPECT_EQ(report.root_cause->kind, "mask");
    EXPECT_EQ(report.first_divergence.has_value(), with_models);  // logits need a reference
  }
}

TEST(CaptureCheckTest, WithoutModelsTheReportSaysWhatWasNotCompared) {
  const auto file = fixtureCapture("greedy-static-full.kvcapture");
  const CaptureCheckReport report = checkWith(*file, nullptr);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.rows_value_checked, 0);
  ASSERT_FALSE(report.notes.empty());
  EXPECT_NE(report.notes.front().find("not compared"), std::string::npos);
}

TEST(CaptureModelsTest, TheFingerprintTellsTheCapturedCheckpointFromAnother) {
  const auto file = fixtureCapture("greedy-static-full.kvcapture");
  const CaptureModel& target = *file->manifest().model(CaptureRole::Target);
  EXPECT_EQ(captureModelMismatch(target, *fixtureModel("llama-tiny")), "");
  EXPECT_NE(captureModelMismatch(target, *fixtureModel("llama-tiny-draft")).find("num_hidden_layers"), std::string::npos);
  EXPECT_NE(captureModelMismatch(target, *fixtureModel("mistral-sw-tiny")), "");
  // An engine that names no config fields is still matched by its weights:
  // the draft model is the target's embedding plus 1% noise.
  CaptureModel anonymous = target;
  anonymous.config = {};
  anonymous.layers = 1;
  EXPECT_NE(captureModelMismatch(anonymous, *fixtureModel("llama-tiny-draft")).find("input embeddings differ"),
            std::string::npos);
}

}  // namespace
}  // namespace kvscope
