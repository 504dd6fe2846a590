// A checked capture as the snapshot the GUI's views read: rounds inferred
// from the target's calls alone, events in moment order with each role's own
// order kept, the streams and final layouts the checker used, and the root
// cause at the moment kvscope's own diff names for the same fault (the
// capture knows nothing of kvscope's rounds).
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "core/audit/root_cause.h"
#include "core/capture/capture_file.h"
#include "core/check/capture_inspection.h"
#include "core/check/capture_snapshot.h"
#include "core/check/capture_writer.h"
#include "core/control/session_controller.h"
#include "core/decode/session.h"
#include "core/snapshot/snapshot_builder.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

ModelSpec pairSpec(const std::string& fault) {
  ModelSpec spec;
  if (fault == "window-roll-early") {
    spec.target_dir = std::string(KVSCOPE_FIXTURES) + "/models/mistral-sw-tiny";
    spec.drafter_kind = DrafterKind::Ngram;
    spec.max_ngram = 2;
    return spec;
  }
  spec.target_dir = std::string(KVSCOPE_FIXTURES) + "/models/llama-tiny";
  spec.drafter_dir = std::string(KVSCOPE_FIXTURES) + "/models/llama-tiny-draft";
  return spec;
}

SessionSpec faulty(const std::string& fault, int64_t gamma) {
  SessionSpec spec;
  spec.prompt = "Once upon a time";
  spec.options.max_new_tokens = 32;
  spec.options.gamma = gamma;
  spec.options.ignore_eos = true;
  spec.options.fault = parseFault(fault);
  return spec;
}

struct Opened {
  std::optional<RootCause> diff_cause;  // kvscope's own diff of the session
  CaptureInspection inspection;
  std::shared_ptr<const CaptureFile> file;
};

// The capture's record as the views read it (rounds inferred, moment order).
SessionRecord recordOf(const Opened& opened) {
  return captureRecordView(buildCaptureTimeline(*opened.file)).record;
}

// Runs the diff of `fault`, writes the same session as a capture and opens
// it as the GUI does, with the same models loaded.
Opened diffAndOpen(SessionController& controller, const std::string& fault, int64_t gamma) {
  std::atomic<bool> cancel{false};
  Opened out;
  out.diff_cause = controller.runDiff(faulty(fault, gamma), cancel).root_cause;
  const fs::path path = fs::temp_directory_path() / ("kvscope_capture_snapshot_" + std::to_string(::getpid()) + ".kvcapture");
  const SessionController::LoadedModels loaded = controller.loaded();
  writeSessionCapture(path.string(), controller.liveSession()->record(), {loaded.target_dir, loaded.target.get()},
                      {loaded.drafter_dir, loaded.drafter.get()}, "kvscope test");
  std::array<LoadedCaptureModel, kCaptureRoles> candidates;
  candidates[0] = {loaded.target, loaded.tokenizer, loaded.target_dir};
  candidates[1] = {loaded.drafter, loaded.tokenizer, loaded.drafter_dir};
  SnapshotBuilder builder;
  out.inspection = inspectCapture(path.string(), candidates, builder);
  out.file = CaptureFile::open(path.string());
  fs::remove(path);
  return out;
}

bool momentBefore(const Moment& a, const Moment& b) {
  return a.round != b.round ? a.round < b.round : static_cast<int>(a.phase) < static_cast<int>(b.phase);
}

TEST(CaptureSnapshotTest, RoundsStreamsAndLayoutsAreTheTimelines) {
  SessionController controller;
  controller.loadModels(pairSpec("prune-short"));
  std::atomic<bool> cancel{false};
  controller.runDiff(faulty("prune-short", 4), cancel);
  const fs::path path = fs::temp_directory_path() / ("kvscope_capture_view_" + std::to_string(::getpid()) + ".kvcapture");
  const SessionController::LoadedModels loaded = controller.loaded();
  const SessionRecord& session = controller.liveSession()->record();
  writeSessionCapture(path.string(), session, {loaded.target_dir, loaded.target.get()},
                      {loaded.drafter_dir, loaded.drafter.get()}, "kvscope test");
  const auto file = CaptureFile::open(path.string());
  fs::remove(path);
  const CaptureTimeline timeline = buildCaptureTimeline(*file);
  const CaptureRecordView view = captureRecordView(timeline);
  const SessionRecord& record = view.record;

  // Every round's stream, as the views compute it, is the checker's.
  const int64_t target_calls = static_cast<int64_t>(timeline.frontiers.size()) - 1;
  ASSERT_GE(target_calls, 3);
  for (int64_t k = 1; k < target_calls; ++k) {
    EXPECT_EQ(record.streamOfRound(k), timeline.streams[static_cast<size_t>(k)]) << "round " << k;
  }
  // The rounds inferred from the capture are the session's own.
  ASSERT_EQ(record.rounds.size(), session.rounds.size());
  for (size_t k = 1; k < record.rounds.size(); ++k) {
    EXPECT_EQ(record.rounds[k].drafts, session.rounds[k].drafts) << "round " << k;
    EXPECT_EQ(record.rounds[k].accepted, session.rounds[k].accepted) << "round " << k;
    EXPECT_EQ(record.rounds[k].next_token, session.rounds[k].next_token) << "round " << k;
  }
  ASSERT_EQ(record.origins.size(), session.origins.size());
  for (size_t i = 0; i < record.origins.size(); ++i) {
    EXPECT_EQ(tokenOriginName(record.origins[i]), std::string(tokenOriginName(session.origins[i]))) << "position " << i;
  }

  // Events in moment order; each role's in the order the run made them.
  const auto& events = record.events.events();
  ASSERT_EQ(events.size(), timeline.steps.size());
  for (size_t i = 1; i < events.size(); ++i) EXPECT_FALSE(momentBefore(events[i].moment(), events[i - 1].moment())) << i;
  for (size_t a = 0; a + 1 < timeline.steps.size(); ++a) {
    for (size_t b = a + 1; b < timeline.steps.size(); ++b) {
      if (timeline.steps[a].role != timeline.steps[b].role) continue;
      EXPECT_LT(view.event_of_step[a], view.event_of_step[b]) << "steps " << a << ", " << b;
      break;
    }
  }
  // Replaying the rearranged log gives each cache's last layout.
  for (const CacheRole cache : {CacheRole::Target, CacheRole::Drafter}) {
    const int64_t layers = record.layers(cache);
    const CacheLayout replayed = record.events.layoutAfterEvents(cache, layers, events.size());
    for (size_t s = timeline.steps.size(); s-- > 0;) {
      if (cacheRoleOf(timeline.steps[s].role) != cache) continue;
      EXPECT_EQ(replayed.layers, timeline.event(s).layout) << cacheRoleName(cache);
      break;
    }
  }
  // Verify attention, recomputed over the captured rows, for every round of an append cache.
  EXPECT_EQ(static_cast<int64_t>(record.verify.size()), 0) << "the view itself holds no attention (captureSnapshot adds it)";
  // Each event names the call it stands for.
  for (const CacheEvent& e : events) EXPECT_NE(e.call.find(" call "), std::string::npos) << describeEvent(e);
}

class CaptureSnapshotOnTheBugZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CaptureSnapshotOnTheBugZoo, RootCauseSitsWhereTheDiffPutsIt) {
  const std::string fault = GetParam();
  SessionController controller;
  controller.loadModels(pairSpec(fault));
  for (const int64_t gamma : {4, 2, 1}) {
    const Opened opened = diffAndOpen(controller, fault, gamma);
    if (!opened.diff_cause && gamma > 1) continue;
    const SessionSnapshot& snapshot = *opened.inspection.snapshot;
    EXPECT_TRUE(snapshot.from_capture);
    EXPECT_TRUE(snapshot.replay_only);
    ASSERT_TRUE(snapshot.diff != nullptr);
    for (const std::string& note : snapshot.notes) EXPECT_EQ(note.find("not checked"), std::string::npos) << note;
    if (!opened.diff_cause) {
      EXPECT_FALSE(snapshot.diff->root_cause.has_value()) << snapshot.diff->root_cause->what;
      return;
    }
    ASSERT_TRUE(snapshot.diff->root_cause.has_value()) << fault;
    const RootCause& got = *snapshot.diff->root_cause;
    const RootCause& want = *opened.diff_cause;
    EXPECT_EQ(got.cache, want.cache) << got.what << "\ndiff: " << want.what;
    EXPECT_EQ(got.round, want.round) << got.what << "\ndiff: " << want.what;
    EXPECT_EQ(got.phase, want.phase) << got.what << "\ndiff: " << want.what;
    ASSERT_TRUE(snapshot.diff->audit_at_divergence.has_value());
    EXPECT_FALSE(snapshot.diff->audit_at_divergence->rows.empty() && !got.verdicts.empty());
    // One root-cause machine: the session's own finder, run on the capture's
    // record, stops at the same operation when the breach is structural.
    const std::string kind = opened.inspection.report.root_cause->kind;
    if (kind != "values" && kind != "mask" && kind != "logits") {
      const std::optional<RootCause> same = findRootCause(recordOf(opened), RootCauseOptions{});
      ASSERT_TRUE(same.has_value()) << got.what;
      EXPECT_EQ(same->event_index, got.event_index) << same->what << "\ncheck: " << got.what;
    }
    return;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, CaptureSnapshotOnTheBugZoo,
                         ::testing::Values("none", "no-prune", "prune-short", "prune-long-no-refeed",
                                           "reset-not-rollback", "crop-zero-noop", "stale-rope", "partial-layer-crop",
                                           "full-prefix-with-cache", "drafter-not-pruned", "half-cache",
                                           "bonus-not-fed", "verify-mask-leak", "append-reversed",
                                           "window-roll-early"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(CaptureSnapshotTest, AnotherCheckpointOpensWithANoteInsteadOfFailing) {
  SessionController writer;
  writer.loadModels(pairSpec("none"));
  std::atomic<bool> cancel{false};
  writer.runDiff(faulty("none", 4), cancel);
  const fs::path path = fs::temp_directory_path() / ("kvscope_capture_other_" + std::to_string(::getpid()) + ".kvcapture");
  const SessionController::LoadedModels loaded = writer.loaded();
  // A name that is no directory here: only the loaded models could serve.
  writeSessionCapture(path.string(), writer.liveSession()->record(), {"no/such/target", loaded.target.get()},
                      {"no/such/drafter", loaded.drafter.get()}, "kvscope test");
  SessionController other;
  other.loadModels(pairSpec("window-roll-early"));  // a different target
  const SessionController::LoadedModels wrong = other.loaded();
  std::array<LoadedCaptureModel, kCaptureRoles> candidates;
  candidates[0] = {wrong.target, wrong.tokenizer, wrong.target_dir};
  SnapshotBuilder builder;
  const CaptureInspection inspection = inspectCapture(path.string(), candidates, builder);
  fs::remove(path);
  ASSERT_EQ(inspection.snapshot->notes.size(), 2u);
  EXPECT_NE(inspection.snapshot->notes[0].find("target's K/V values and logits were not checked"), std::string::npos)
      << inspection.snapshot->notes[0];
  EXPECT_NE(inspection.snapshot->notes[0].find("differs"), std::string::npos) << inspection.snapshot->notes[0];
  EXPECT_FALSE(inspection.snapshot->diff->root_cause.has_value()) << "the structure of a correct run holds";
  EXPECT_TRUE(inspection.model_dirs[0].empty());
}

TEST(CaptureSnapshotTest, VerifyAttentionOverTheCapturedRowsIsTheSessionsOwn) {
  // No fault: the engine's cache is kvscope's, so the recomputed attention of
  // every verify equals what the session recorded.
  SessionController controller;
  controller.loadModels(pairSpec("none"));
  const Opened opened = diffAndOpen(controller, "none", 4);
  const SessionSnapshot& snapshot = *opened.inspection.snapshot;
  const auto live = controller.snapshot();
  ASSERT_FALSE(live->attention.empty());
  int64_t compared = 0;
  for (const auto& [round, recorded] : live->attention) {
    const auto found = snapshot.attention.find(round);
    ASSERT_NE(found, snapshot.attention.end()) << "round " << round;
    const AttentionData& replayed = *found->second;
    ASSERT_EQ(replayed.layerCount(), recorded->layerCount()) << "round " << round;
    // The session keeps the verified query rows: the last `queries` of the
    // replay's (a bonus token fed along comes first).
    const int64_t offset = replayed.queries - recorded->queries;
    ASSERT_GE(offset, 0);
    EXPECT_EQ(replayed.first_query_position + offset, recorded->first_query_position) << "round " << round;
    for (int64_t l = 0; l < recorded->layerCount(); ++l) {
      ASSERT_EQ(replayed.keyCount(l), recorded->keyCount(l)) << "round " << round << " layer " << l;
      for (int64_t h = 0; h < recorded->heads; ++h) {
        for (int64_t q = 0; q < recorded->queries; ++q) {
          for (int64_t k = 0; k < recorded->keyCount(l); ++k) {
            EXPECT_NEAR(replayed.at(l, h, q + offset, k), recorded->at(l, h, q, k), 1e-5);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace kvscope
