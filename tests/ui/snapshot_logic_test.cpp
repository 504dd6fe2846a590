// The plain logic under the views, on a hand-made session (no models): the
// physical rows of a layer at a moment and their verdicts, the K/V matrix, a
// row's history, the global cursor (rows follow identity, stepping through
// history) and the GUI state a trace keeps.
#include <QJsonObject>
#include <QtTest>
#include <memory>

#include "core/snapshot/snapshot.h"
#include "ui/context/DebuggerContext.h"
#include "ui/context/GuiState.h"
#include "ui/context/RowHistory.h"
#include "ui/context/RowLookup.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

LedgerEntry entry(int64_t position, int64_t token, int64_t born, Phase phase, int64_t row) {
  LedgerEntry e;
  e.position = e.rope_position = position;
  e.token = token;
  e.born_round = born;
  e.born_phase = phase;
  e.row = row;
  return e;
}

CacheEvent event(int64_t round, Phase phase, CacheEventKind kind, int64_t before, int64_t after, int64_t expected,
                 std::vector<int64_t> written = {}, std::vector<int64_t> removed = {}) {
  CacheEvent e;
  e.round = round;
  e.phase = phase;
  e.kind = kind;
  e.rows_before = {before};
  e.rows_after = {after};
  e.expected_rows = expected;
  e.reason = removed.empty() ? DeathReason::Alive : DeathReason::RejectedDraft;
  e.written = std::move(written);
  e.removed = std::move(removed);
  return e;
}

// Prompt [10 11 12]; round 1 drafts [20 21], one accepted, correction 30.
// The target's prune keeps 5 rows where 4 are required when `prune_short`
// (entry 4, the rejected draft 21, stays); round 2 then verifies [30] + [40].
std::shared_ptr<SessionSnapshot> handMade(bool prune_short) {
  auto s = std::make_shared<SessionSnapshot>();
  s->target = CacheGeometry{true, 1, 1, 2, 2};  // 1 layer, 1 kv head, 2 query heads, head_dim 2
  s->sequence = {10, 11, 12, 20, 30};
  s->prompt_length = 3;
  s->rounds.resize(3);
  s->rounds[0].index = 0;
  s->rounds[1] = RoundRecord{1, 3, 2, {20, 21}};
  s->rounds[1].accepted = 1;
  s->rounds[1].next_token = 30;
  s->rounds[2] = RoundRecord{2, 5, 1, {40}};
  s->current_round = 2;
  s->next_phase = Phase::Accept;  // round 2's verify is the last thing recorded
  s->entries = {entry(0, 10, 0, Phase::Prefill, 0), entry(1, 11, 0, Phase::Prefill, 1), entry(2, 12, 1, Phase::Verify, 2),
                entry(3, 20, 1, Phase::Verify, 3),  entry(4, 21, 1, Phase::Verify, 4),  entry(4, 30, 2, Phase::Verify, 5),
                entry(5, 40, 2, Phase::Verify, 6)};
  for (int r = 0; r < 7; ++r) {
    auto row = std::make_shared<KvRowData>();
    row->k = {static_cast<float>(r), static_cast<float>(10 * r)};
    row->v = {static_cast<float>(-r), 0.5f};
    s->rows.push_back(row);
  }
  std::vector<CacheEvent> events;
  events.push_back(event(0, Phase::Prefill, CacheEventKind::Append, 0, 2, 2, {0, 1}));
  events.push_back(event(1, Phase::Verify, CacheEventKind::Append, 2, 5, 5, {2, 3, 4}));
  CacheEvent prune = event(1, Phase::Prune, CacheEventKind::Crop, 5, prune_short ? 5 : 4, 4, {},
                           prune_short ? std::vector<int64_t>{} : std::vector<int64_t>{4});
  if (prune_short) prune.fault_action = "removed one row too few";
  events.push_back(prune);
  const int64_t rows = prune_short ? 5 : 4;
  events.push_back(event(2, Phase::Verify, CacheEventKind::Append, rows, rows + 2, 6, {5, 6}));
  s->events.restore(events);
  if (!prune_short) {
    s->entries[4].died_round = 1;
    s->entries[4].reason = DeathReason::RejectedDraft;
  }
  return s;
}

}  // namespace

class SnapshotLogicTest : public QObject {
  Q_OBJECT
 private slots:
  void rowsAreThePhysicalRowsAtEachMoment() {
    const auto s = handMade(false);
    QCOMPARE(physicalRows(*s, CacheRole::Target, 0, {1, Phase::Verify}), (std::vector<int64_t>{0, 1, 2, 3, 4}));
    const std::vector<ViewRow> pruned = viewRows(*s, CacheRole::Target, 0, {1, Phase::Prune});
    QCOMPARE(pruned.size(), size_t{5});  // four held, then the one this round removed
    QCOMPARE(pruned[4].entry, int64_t{4});
    QCOMPARE(pruned[4].physical_row, int64_t{-1});
    QCOMPARE(pruned[4].status, RowStatus::WrittenPruned);
    QCOMPARE(pruned[0].status, RowStatus::Kept);
    QCOMPARE(pruned[3].status, RowStatus::Written);
    for (const ViewRow& row : pruned) QCOMPARE(row.state, RowState::Ok);
    const CacheMatrix k = cacheMatrix(*s, CacheRole::Target, {1, Phase::Prune}, 0, 0, false);
    QCOMPARE(k.cols, int64_t{2});
    QCOMPARE(k.values[2 * 3 + 1], 30.0f);  // row 3 (entry 3), dim 1
    QCOMPARE(k.max, 40.0f);
    QVERIFY(cacheMatrix(*s, CacheRole::Drafter, {1, Phase::Prune}, 0, 0, false).rows.empty());
  }

  void aStaleRowIsMarkedAndItsHistoryNamesTheOperation() {
    const auto s = handMade(true);
    const std::vector<ViewRow> rows = viewRows(*s, CacheRole::Target, 0, {1, Phase::Prune});
    QCOMPARE(rows.size(), size_t{5});
    QCOMPARE(rows[4].state, RowState::Stale);
    const RowHistory history = rowHistory(*s, 4, 0);
    QCOMPARE(history.events.size(), size_t{3});
    QCOMPARE(history.events[0].effect, RowEffect::Born);
    QCOMPARE(history.events[0].state, RowState::Ok);
    QCOMPARE(history.events[1].effect, RowEffect::Kept);
    QCOMPARE(history.events[1].state, RowState::Stale);
    QCOMPARE(history.events[1].fault_action, std::string("removed one row too few"));
    QVERIFY(QString::fromStdString(history.events[1].event_text).contains("5 -> 5 rows, 4 required"));
    QCOMPARE(history.events[2].effect, RowEffect::Rivalled);  // round 2 wrote the correction for position 4
    // The live row for position 4 is the correction (row 5); the stale one loses.
    QCOMPARE(entryAtPosition(*s, CacheRole::Target, 0, {2, Phase::Verify}, 4), int64_t{5});
    QCOMPARE(rowOfEntry(*s, CacheRole::Target, 0, {2, Phase::Verify}, 5), int64_t{5});
  }

  void theCursorFollowsRowsByIdentity() {
    DebuggerContext context;
    context.setSnapshot(handMade(true), SnapshotReason::NewSession);
    QCOMPARE(context.cursor().round, int64_t{2});
    QCOMPARE(context.cursor().phase, Phase::Verify);
    context.selectPosition(4);
    QCOMPARE(context.cursor().entry, int64_t{5});
    QCOMPARE(context.cursor().row, int64_t{5});
    context.selectEntry(4);  // the stale row
    QCOMPARE(context.cursor().row, int64_t{4});
    QCOMPARE(context.cursor().position, int64_t{4});
    context.goToMoment({1, Phase::Draft});  // not born yet: kept selected, no row
    QCOMPARE(context.cursor().entry, int64_t{4});
    QCOMPARE(context.cursor().row, int64_t{-1});
    // Stepping through history, phase by phase and to the end of a round.
    QVERIFY(context.stepHistory(false));
    QCOMPARE(context.cursor().phase, Phase::Verify);
    QCOMPARE(context.cursor().row, int64_t{4});
    QVERIFY(context.stepHistory(true));
    QCOMPARE(context.cursor().round, int64_t{1});
    QCOMPARE(context.cursor().phase, Phase::Prune);
    QVERIFY(context.stepHistory(true));  // round 2 has not been pruned: stops at its latest moment
    QCOMPARE(context.cursor().round, int64_t{2});
    QCOMPARE(context.cursor().phase, Phase::Verify);
    QVERIFY(!context.stepHistory(false));  // at the latest moment: the live session's turn
    QVERIFY(context.stepBackPhase());
    QCOMPARE(context.cursor().phase, Phase::Draft);
    // A physical row without an entry is identified at the cursor's moment.
    context.goToMoment({1, Phase::Prune});
    context.selectRow(CacheRole::Target, 0, 2);
    QCOMPARE(context.cursor().entry, int64_t{2});
  }

  void guiStateRoundTrips() {
    GuiState state;
    state.cursor.round = 3;
    state.cursor.phase = Phase::Accept;
    state.cursor.position = 11;
    state.cursor.cache = CacheRole::Drafter;
    state.cursor.layer = 1;
    state.cursor.head = 2;
    state.cursor.row = 10;
    state.cursor.entry = 42;
    state.bookmarks = {2, 5};
    state.values = true;
    state.query_head = 3;
    const GuiState back = guiStateFromJson(toJson(state));
    QVERIFY(back.cursor == state.cursor);
    QCOMPARE(back.bookmarks, state.bookmarks);
    QCOMPARE(back.values, true);
    QCOMPARE(back.query_head, 3);
    QVERIFY(!guiStateFromJson(QJsonObject{}).cursor.valid());
  }

  void lastPhaseFollowsTheSession() {
    SessionSnapshot snapshot;
    snapshot.current_round = 0;
    snapshot.next_phase = Phase::Prefill;
    QCOMPARE(snapshot.lastRound(), int64_t{-1});
    snapshot.current_round = 1;
    snapshot.next_phase = Phase::Draft;
    QCOMPARE(snapshot.lastRound(), int64_t{0});
    QCOMPARE(snapshot.lastPhase(), Phase::Prefill);
    snapshot.current_round = 4;
    snapshot.next_phase = Phase::Accept;
    QCOMPARE(snapshot.lastRound(), int64_t{4});
    QCOMPARE(snapshot.lastPhase(), Phase::Verify);
  }
};

QTEST_GUILESS_MAIN(SnapshotLogicTest)
#include "snapshot_logic_test.moc"
