// The cache diff view: an injected fault is found (first divergence),
// explained (the root cause, as the core reports it) and located ("Go to root
// cause", "Go to first bad cell"); "Audit at cursor" audits a recorded moment
// without moving the cursor; without a fault nothing diverges.
#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QTextBrowser>
#include <QtTest>

#include "ui/widgets/KvHeatmapView.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class DiffViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("diff_view_test"); }

  void diffWithFaultShowsTheRootCause() {
    MainWindow window(fixtureOptions());
    runDiff(window, "no-prune");
    if (QTest::currentTestFailed()) return;
    const DiffReport& diff = *window.context().snapshot()->diff;
    QVERIFY(diff.diverged());
    QVERIFY(diff.root_cause.has_value());
    QVERIFY(diff.audit_at_divergence.has_value());
    QVERIFY(window.diffPanel()->pointCount() > 0);
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QString::fromStdString(diff.root_cause->what)), qPrintable(report));
    QVERIFY(report.contains("iverged at round"));
    QVERIFY(window.diffPanel()->goToRootCauseButton()->isEnabled());

    window.diffPanel()->goToRootCauseButton()->click();
    const Cursor& cursor = window.context().cursor();
    const RootCause& cause = *diff.root_cause;
    QCOMPARE(cursor.round, cause.round);
    QCOMPARE(cursor.phase, cause.phase);
    QCOMPARE(cursor.cache, cause.cache);
    QCOMPARE(cursor.layer, cause.layers.front());
    QCOMPARE(cursor.row, cause.rows.front());
    QCOMPARE(cursor.entry, cause.verdicts.front().entry);
    flush(window);
    // The row history explains the row: the operation that kept it, with the fault's action.
    const RowHistory& history = window.rowHistoryPanel()->history();
    QCOMPARE(history.entry, cursor.entry);
    QVERIFY(std::any_of(history.events.begin(), history.events.end(), [&](const RowHistoryItem& e) {
      return e.moment.round == cause.round && e.moment.phase == cause.phase && e.state != RowState::Ok;
    }));
  }

  void goToFirstBadCellMovesEveryPanel() {
    // partial-layer-crop leaves the rejected rows in the later layers only:
    // the first bad cell is in layer 1, not where the panels start.
    MainWindow window(fixtureOptions());
    runDiff(window, "partial-layer-crop");
    if (QTest::currentTestFailed()) return;
    // The diff's first bad cell: its audit at the first divergence (the grid shows the cursor's moment).
    const CacheAudit* audit = &*window.context().snapshot()->diff->audit_at_divergence;
    const RowVerdict* bad = audit->firstBad();
    QVERIFY(bad != nullptr);
    QCOMPARE(bad->layer, int64_t{1});
    // Start elsewhere: another moment, layer and head.
    Cursor elsewhere = window.context().cursor();
    elsewhere.round = 1;
    elsewhere.phase = Phase::Draft;
    elsewhere.layer = 0;
    elsewhere.head = 1 - bad->worst_head;
    window.context().setCursor(elsewhere);
    flush(window);
    QCOMPARE(window.attentionPanel()->layer(), 0);

    window.diffPanel()->goToBadCellButton()->click();
    flush(window);
    const Cursor& cursor = window.context().cursor();
    QCOMPARE(cursor.round, audit->moment.round);
    QCOMPARE(cursor.phase, audit->moment.phase);
    QCOMPARE(cursor.layer, bad->layer);
    QCOMPARE(cursor.head, bad->worst_head);
    QCOMPARE(cursor.row, bad->row);
    KvHeatmapView* view = bad->cache == CacheRole::Target ? window.kvCachePanel()->targetView()
                                                          : window.kvCachePanel()->drafterView();
    QCOMPARE(int64_t{view->layer()}, bad->layer);
    QCOMPARE(int64_t{view->head()}, bad->worst_head);
    QCOMPARE(view->layerBox()->currentIndex(), int(bad->layer));
    QCOMPARE(view->headBox()->currentIndex(), int(bad->worst_head));
    QCOMPARE(int64_t{window.attentionPanel()->layer()}, bad->layer);
    QCOMPARE(int64_t{window.attentionPanel()->kvHead()}, bad->worst_head);
    QCOMPARE(window.rowHistoryPanel()->history().layer, bad->layer);
    QCOMPARE(window.rowHistoryPanel()->history().entry, bad->entry);
  }

  void auditAtCursorKeepsTheCursor() {
    MainWindow window(fixtureOptions());
    startWithFault(window, "no-prune");
    if (QTest::currentTestFailed()) return;
    for (int i = 0; i < 4; ++i) stepRound(window);
    Cursor past = window.context().cursor();
    past.round = 2;
    past.phase = Phase::Accept;
    past.layer = 1;
    past.head = 1;
    window.context().setCursor(past);
    const Cursor before = window.context().cursor();
    const SnapshotPtr snapshot = window.context().snapshotPtr();
    window.diffPanel()->auditButton()->click();
    waitForSnapshot(window, snapshot);
    if (QTest::currentTestFailed()) return;
    QVERIFY(window.context().snapshot()->audit_target != nullptr);
    const CacheAudit& audit = *window.context().snapshot()->audit_target;
    QCOMPARE(audit.moment.round, int64_t{2});
    QCOMPARE(audit.moment.phase, Phase::Accept);
    QVERIFY(audit.values_checked);
    QVERIFY(window.context().cursor() == before);  // nothing moved
    QCOMPARE(window.context().latest().round, snapshot->lastRound());  // nothing stepped
    QVERIFY(window.diffPanel()->report()->toPlainText().contains("after round 2 accept"));
  }

  void runDiffKeepsTheCursor() {
    MainWindow window(fixtureOptions());
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    Cursor chosen = window.context().cursor();
    chosen.round = 2;
    chosen.phase = Phase::Verify;
    chosen.cache = CacheRole::Target;
    chosen.layer = 1;
    chosen.head = 1;
    chosen.row = 5;
    chosen.entry = -1;
    window.context().setCursor(chosen);
    const Cursor before = window.context().cursor();
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    const Cursor& after = window.context().cursor();
    QCOMPARE(after.round, before.round);
    QCOMPARE(after.phase, before.phase);
    QCOMPARE(after.layer, before.layer);
    QCOMPARE(after.head, before.head);
    QCOMPARE(after.row, before.row);
    QVERIFY(after.entry >= 0);
  }

  void diffWithoutFaultAgrees() {
    MainWindow window(fixtureOptions());
    runDiff(window, "none");
    if (QTest::currentTestFailed()) return;
    const DiffReport& diff = *window.context().snapshot()->diff;
    QVERIFY(!diff.diverged());
    QVERIFY(!diff.root_cause.has_value());
    QCOMPARE(diff.divergent, int64_t{0});
    QVERIFY(!window.diffPanel()->goToRootCauseButton()->isEnabled());
    QVERIFY(window.diffPanel()->report()->toPlainText().contains("kept the contract"));
    const SnapshotPtr snapshot = window.context().snapshotPtr();
    window.diffPanel()->auditButton()->click();
    waitForSnapshot(window, snapshot);
    if (QTest::currentTestFailed()) return;
    QVERIFY(window.context().snapshot()->audit_target != nullptr);
    QVERIFY(window.context().snapshot()->audit_target->clean());
  }
};

QTEST_MAIN(DiffViewTest)
#include "diff_view_test.moc"
