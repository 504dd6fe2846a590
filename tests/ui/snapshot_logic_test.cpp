// The plain logic under the KV view: which rows are visible at a (round,
// phase) and how they are marked. Hand-made ledgers, no models.
#include <QtTest>
#include <memory>

#include "core/trace/snapshot.h"

using namespace kvscope;

namespace {
LedgerEntry entry(int64_t position, int64_t born, Phase born_phase, int64_t died = -1,
                  DeathReason reason = DeathReason::Alive, int64_t row = 0) {
  LedgerEntry e;
  e.cache = CacheRole::Target;
  e.position = position;
  e.token = 100 + position;
  e.born_round = born;
  e.born_phase = born_phase;
  e.died_round = died;
  e.died_phase = Phase::Prune;
  e.reason = reason;
  e.row = row;
  return e;
}
}  // namespace

class SnapshotLogicTest : public QObject {
  Q_OBJECT
 private slots:
  void statusFollowsBirthAndDeath() {
    const LedgerEntry prompt = entry(0, 0, Phase::Prefill);
    QCOMPARE(rowStatusAt(prompt, 0, Phase::Prefill), RowStatus::Written);
    QCOMPARE(rowStatusAt(prompt, 3, Phase::Verify), RowStatus::Kept);

    const LedgerEntry draft = entry(5, 2, Phase::Verify, 2, DeathReason::RejectedDraft);
    QCOMPARE(rowStatusAt(draft, 2, Phase::Draft), RowStatus::Hidden);  // not written yet
    QCOMPARE(rowStatusAt(draft, 2, Phase::Verify), RowStatus::Written);
    QCOMPARE(rowStatusAt(draft, 2, Phase::Accept), RowStatus::Written);
    QCOMPARE(rowStatusAt(draft, 2, Phase::Prune), RowStatus::WrittenPruned);  // visible in its round
    QCOMPARE(rowStatusAt(draft, 3, Phase::Draft), RowStatus::Hidden);          // gone in the next

    const LedgerEntry old = entry(4, 1, Phase::Verify, 3, DeathReason::Refeed);
    QCOMPARE(rowStatusAt(old, 3, Phase::Accept), RowStatus::Kept);
    QCOMPARE(rowStatusAt(old, 3, Phase::Prune), RowStatus::Pruned);
    QCOMPARE(rowStatusAt(old, 4, Phase::Prune), RowStatus::Hidden);
  }

  void matrixRowsOrderedByPositionWithValues() {
    SessionSnapshot snapshot;
    snapshot.target = CacheGeometry{true, 1, 2, 2, 3};  // 1 layer, 2 kv heads, head_dim 3
    snapshot.entries = {entry(1, 0, Phase::Prefill, -1, DeathReason::Alive, 0),
                        entry(0, 0, Phase::Prefill, -1, DeathReason::Alive, 1),
                        entry(2, 1, Phase::Verify, 1, DeathReason::RejectedDraft, 2)};
    for (int r = 0; r < 3; ++r) {
      auto row = std::make_shared<KvRowData>();
      for (int i = 0; i < 6; ++i) {  // [layers=1, kv_heads=2, head_dim=3]
        row->k.push_back(static_cast<float>(10 * r + i));
        row->v.push_back(static_cast<float>(-(10 * r + i)));
      }
      snapshot.rows.push_back(row);
    }
    const CacheMatrix k = cacheMatrix(snapshot, CacheRole::Target, 1, Phase::Prune, 0, 1, false);
    QCOMPARE(k.entry_indices, (std::vector<int64_t>{1, 0, 2}));  // positions 0, 1, 2
    QCOMPARE(k.cols, int64_t{3});
    QCOMPARE(k.values[0], 13.0f);  // entry 1 (row 1), head 1, dim 0
    QCOMPARE(k.values[8], 25.0f);  // entry 2 (row 2), head 1, dim 2
    QCOMPARE(k.status[2], RowStatus::WrittenPruned);
    QCOMPARE(k.status[0], RowStatus::Kept);
    const CacheMatrix v = cacheMatrix(snapshot, CacheRole::Target, 2, Phase::Draft, 0, 0, true);
    QCOMPARE(v.entry_indices.size(), size_t{2});  // the pruned draft is gone
    QCOMPARE(v.min, -12.0f);
    QCOMPARE(v.max, 0.0f);
    // Out-of-range selectors and a missing cache give an empty matrix.
    QVERIFY(cacheMatrix(snapshot, CacheRole::Target, 1, Phase::Prune, 1, 0, false).entry_indices.empty());
    QVERIFY(cacheMatrix(snapshot, CacheRole::Drafter, 1, Phase::Prune, 0, 0, false).entry_indices.empty());
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
    snapshot.next_phase = Phase::Draft;
    QCOMPARE(snapshot.lastRound(), int64_t{3});
    QCOMPARE(snapshot.lastPhase(), Phase::Prune);
  }
};

QTEST_GUILESS_MAIN(SnapshotLogicTest)
#include "snapshot_logic_test.moc"
