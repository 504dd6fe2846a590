// Views that stay right when the cache is wrong, on the fixture pair with
// injected faults: Verify Attention's keys are the cache rows the model saw
// (labels = the rows' written-for positions and tokens, mask = the model's
// mask), attention received is per row, and stepping from a past moment
// walks recorded history instead of the live session.
#include <QAction>
#include <QtTest>
#include <cmath>
#include <map>

#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

struct AttentionSeen {
  int layouts = 0;            // (round, layer) pairs checked
  bool row_not_position = false;  // some key row held another position than its index
  bool layers_differ = false;     // some round's layers attended to different row counts
  bool wrong_key_marked = false;  // some key was marked (not ok)
};

// Every verify pass, every layer: the panel's keys against the snapshot's record.
AttentionSeen checkEveryVerify(MainWindow& window) {
  AttentionSeen seen;
  const SessionSnapshot& s = *window.context().snapshot();
  AttentionPanel* panel = window.attentionPanel();
  for (const auto& [round, data] : s.attention) {
    const AttentionData& a = *data;
    window.context().goToMoment({round, Phase::Verify});
    for (int64_t layer = 0; layer < a.layerCount(); ++layer) {
      window.context().setLayerHead(CacheRole::Target, layer, 0);
      panel->flushRefresh();
      ++seen.layouts;
      const std::vector<int64_t> rows = verifyKeyRows(s, round, layer);
      const auto context = qPrintable(QStringLiteral("round %1 layer %2").arg(round).arg(layer));
      [&] {
        QCOMPARE(int64_t{panel->layer()}, layer);
        QCOMPARE(int64_t{panel->keyCount()}, a.keyCount(layer));  // no axis beyond the real rows
        QCOMPARE(static_cast<int64_t>(rows.size()), a.keyCount(layer));
        QCOMPARE(panel->plot()->xAxis->range().upper, panel->keyCount() - 0.5);
        auto ticker = panel->plot()->xAxis->ticker().dynamicCast<QCPAxisTickerText>();
        QVERIFY2(ticker, context);
        for (int k = 0; k < panel->keyCount(); ++k) {
          const AttentionKey& key = panel->keys()[k];
          const LedgerEntry& e = s.entries[static_cast<size_t>(rows[static_cast<size_t>(k)])];
          QCOMPARE(key.entry, rows[static_cast<size_t>(k)]);
          QCOMPARE(key.position, e.position);
          QCOMPARE(key.token, e.token);
          QVERIFY2(e.position >= 0, context);
          QVERIFY2(key.label.contains(QString::number(e.position)), qPrintable(key.label));
          QVERIFY2(key.label.contains(displayToken(s.tokenText(e.token)).left(5)), qPrintable(key.label));
          if (ticker->ticks().contains(k)) QCOMPARE(ticker->ticks().value(k), key.label);
          seen.row_not_position = seen.row_not_position || e.position != k;
          seen.wrong_key_marked = seen.wrong_key_marked || key.state != RowState::Ok;
          for (int q = 0; q < panel->queryRows(); ++q) {  // the mask drawn is the model's
            QCOMPARE(std::isnan(panel->cell(q, k)), !a.visible(layer, q, k));
          }
        }
      }();
      if (QTest::currentTestFailed()) {
        qWarning("while checking %s", context);
        return seen;
      }
    }
    for (int64_t layer = 1; layer < a.layerCount(); ++layer) {
      seen.layers_differ = seen.layers_differ || a.keyCount(layer) != a.keyCount(0);
    }
  }
  return seen;
}

// KVSCOPE_UI_SHOTS=dir saves the window at a moment and layer (for reviewing the UI).
void shoot(MainWindow& window, const char* name, const Moment& moment, int64_t layer) {
  const QByteArray dir = qgetenv("KVSCOPE_UI_SHOTS");
  if (dir.isEmpty()) return;
  window.resize(1600, 1000);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  window.context().goToMoment(moment);
  window.context().setLayerHead(CacheRole::Target, layer, 0);
  flush(window);
  QTest::qWait(200);
  QVERIFY(window.grab().save(QString::fromUtf8(dir) + "/" + name + ".png"));
}

void stepRounds(MainWindow& window, int rounds) {
  for (int i = 0; i < rounds && !window.context().snapshot()->finished; ++i) stepRound(window);
}

}  // namespace

class RowIdentityViewsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("row_identity_views_test"); }

  void verifyAttentionUnderResetNotRollback() {
    MainWindow window(fixtureOptions());
    startWithFault(window, "reset-not-rollback");
    if (QTest::currentTestFailed()) return;
    stepRounds(window, 4);
    const AttentionSeen seen = checkEveryVerify(window);
    if (QTest::currentTestFailed()) return;
    QVERIFY(seen.layouts >= 4);
    // After a reset the cache's rows no longer hold their own positions.
    QVERIFY(seen.row_not_position);
    shoot(window, "attention-reset-not-rollback", {3, Phase::Verify}, 0);
  }

  void verifyAttentionUnderPartialLayerCrop() {
    MainWindow window(fixtureOptions());
    startWithFault(window, "partial-layer-crop");
    if (QTest::currentTestFailed()) return;
    stepRounds(window, 4);
    const AttentionSeen seen = checkEveryVerify(window);
    if (QTest::currentTestFailed()) return;
    QVERIFY(seen.layers_differ);     // layer 1 kept the rejected rows, layer 0 did not
    QVERIFY(seen.wrong_key_marked);  // and they are marked
    shoot(window, "attention-partial-layer-crop", {2, Phase::Verify}, 1);
  }

  void pruneShortStaleAndLiveRowsReceiveDifferentAttention() {
    MainWindow window(fixtureOptions());
    startWithFault(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    stepRounds(window, 4);
    const SessionSnapshot& s = *window.context().snapshot();
    // A verify whose keys hold two rows for one position: the stale one and the live one.
    int64_t round = -1, stale = -1, live = -1;
    for (const auto& [r, data] : s.attention) {
      std::map<int64_t, std::vector<int64_t>> by_position;
      for (int64_t entry : verifyKeyRows(s, r, 0)) by_position[s.entries[static_cast<size_t>(entry)].position].push_back(entry);
      for (const auto& [position, entries] : by_position) {
        if (entries.size() < 2 || round >= 0) continue;
        round = r;
        stale = entries[0];
        live = entries[1];
      }
    }
    QVERIFY2(round >= 0, "no verify pass held two rows for one position");
    QCOMPARE(s.entries[stale].position, s.entries[live].position);
    const auto received = [&](int64_t entry) {
      window.context().selectEntry(entry);
      window.context().goToMoment({round, Phase::Verify});
      window.context().setLayerHead(CacheRole::Target, 0, 0);
      flush(window);
      const RowHistory& history = window.rowHistoryPanel()->history();
      for (const RowAttention& a : history.attention) {
        if (a.round == round) return a.per_head;
      }
      return std::vector<float>{};
    };
    const std::vector<float> stale_received = received(stale);
    QCOMPARE(window.context().cursor().entry, stale);
    const std::vector<float> live_received = received(live);
    QCOMPARE(window.context().cursor().entry, live);
    QVERIFY(!stale_received.empty());
    QCOMPARE(stale_received.size(), live_received.size());
    QVERIFY(stale_received != live_received);
    QCOMPARE(stale_received, attentionReceived(s, round, 0, stale));
    QCOMPARE(live_received, attentionReceived(s, round, 0, live));
  }

  void steppingFromThePastWalksRecordedHistory() {
    MainWindow window(fixtureOptions());
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRounds(window, 3);
    const SnapshotPtr snapshot = window.context().snapshotPtr();
    const Cursor latest = window.context().latest();
    window.context().goToMoment({1, Phase::Draft});
    QVERIFY(window.stepPhaseAction()->isEnabled());

    QTest::keyClick(&window, Qt::Key_F10);  // F10: the next recorded phase
    QCOMPARE(window.context().cursor().round, int64_t{1});
    QCOMPARE(window.context().cursor().phase, Phase::Verify);
    window.stepPhaseAction()->trigger();
    QCOMPARE(window.context().cursor().phase, Phase::Accept);
    window.stepRoundAction()->trigger();  // F11: to the end of the round
    QCOMPARE(window.context().cursor().phase, Phase::Prune);
    window.stepRoundAction()->trigger();
    QCOMPARE(window.context().cursor().round, int64_t{2});
    QCOMPARE(window.context().cursor().phase, Phase::Prune);
    window.stepBackAction()->trigger();
    QCOMPARE(window.context().cursor().phase, Phase::Accept);
    // The panels follow the recorded moment; the live session did not move.
    flush(window);
    QCOMPARE(window.attentionPanel()->queryRows(), int(snapshot->attention.at(2)->queries));
    QTest::qWait(50);
    QVERIFY(!window.controller().busy());
    QCOMPARE(window.context().snapshot(), snapshot.get());
    QCOMPARE(window.context().latest().round, latest.round);
    QCOMPARE(window.context().latest().phase, latest.phase);

    // Only from the latest moment does F10 advance the live session.
    window.context().goToMoment(latest.moment());
    QTest::keyClick(&window, Qt::Key_F10);
    waitForSnapshot(window, snapshot);
    if (QTest::currentTestFailed()) return;
    QVERIFY(!atOrBefore(window.context().latest().moment(), latest.moment()));  // it moved on
  }
};

QTEST_MAIN(RowIdentityViewsTest)
#include "row_identity_views_test.moc"
