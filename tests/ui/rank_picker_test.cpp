// A tensor-parallel run's ranks in the GUI: the status bar's rank picker lists
// every rank with the root cause's marked, opens on that rank, and picking
// another rank re-shows every panel on that rank's capture; the KV views
// number a rank's KV heads as the model does, and the status bar says which
// heads the shown rank holds. Hidden for one file. The fixtures are
// tp_engine.py's two ranks of the fixture pair (2 KV heads, one per rank),
// rank 1's rollback keeping a rejected draft (tests/python/make_rank_fixtures.py).
#include <QComboBox>
#include <QLabel>
#include <QTextBrowser>
#include <QtTest>
#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/KvHeadGrid.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/SequencePicker.h"
#include "ui/windows/KvCachePanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const char* const kRank0 = KVSCOPE_FIXTURES "/captures/tp-rank0.kvcapture";
const char* const kRank1 = KVSCOPE_FIXTURES "/captures/tp-rank1.kvcapture";
const char* const kOneFile = KVSCOPE_FIXTURES "/captures/verify-mask-leak-dynamic-topk.kvcapture";

bool captureShown(MainWindow& window) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  return snapshot != nullptr && snapshot->from_capture && !window.controller().busy();
}

QStringList headLabels(QComboBox* box) {
  QStringList out;
  for (int i = 0; i < box->count(); ++i) out << box->itemText(i);
  return out;
}

QStringList gridLabels(KvHeadGrid* grid) {
  QStringList out;
  for (QCPAxisRect* rect : grid->plot()->axisRects()) out << rect->axis(QCPAxis::atBottom)->label();
  return out;
}

}  // namespace

class RankPickerTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("rank_picker_test"); }

  void everyPanelFollowsThePickedRank() {
    MainWindowOptions options = fixtureOptions();
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.openCaptures({QString::fromUtf8(kRank0), QString::fromUtf8(kRank1)});
    QTRY_VERIFY_WITH_TIMEOUT(captureShown(window), kTimeout);
    auto* picker = window.findChild<SequencePicker*>(QStringLiteral("rankPicker"));
    auto* combo = window.findChild<QComboBox*>(QStringLiteral("rankCombo"));
    auto* note = window.findChild<QLabel*>(QStringLiteral("rankNote"));
    QVERIFY(picker != nullptr && combo != nullptr && note != nullptr);
    QTRY_VERIFY(picker->isVisible());
    // The Batch picker stays hidden: each rank holds one sequence.
    QVERIFY(!window.findChild<SequencePicker*>(QStringLiteral("sequencePicker"))->isVisible());
    QCOMPARE(combo->count(), 2);
    QCOMPARE(combo->itemText(0), QStringLiteral("rank 0 of 2: later breach"));  // wrong values carried by the summed activations
    QCOMPARE(combo->itemText(1), QStringLiteral("rank 1 of 2: root cause"));
    // Opened on rank 1, the rank whose rollback broke the contract.
    QCOMPARE(combo->currentIndex(), 1);
    const SessionSnapshot* first = window.context().snapshot();
    QCOMPARE(first->rank, int64_t{1});
    QVERIFY(first->diff && first->diff->root_cause);
    QCOMPARE(first->diff->root_cause->kind, std::string("crop"));
    QVERIFY2(note->isVisible() && note->text() == QStringLiteral("holds KV head 1 of 2"),
             qPrintable(note->text()));

    // Rank 1 holds the model's KV head 1: its one head is labelled 1, not 0.
    flush(window);
    KvHeatmapView* view = window.kvCachePanel()->targetView();
    QCOMPARE(headLabels(view->headBox()), QStringList{QStringLiteral("1")});
    view->setAllHeads(true);
    flush(window);
    QCOMPARE(gridLabels(view->headGrid()), QStringList{QStringLiteral("kv head 1")});
    view->setAllHeads(false);
    flush(window);
    const QString rank1_rows = view->csv();
    QVERIFY(view->rowCount() > 0);

    // Rank 0: every panel shows its capture; its head is 0 and its rows are other values.
    emit combo->activated(0);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != first && captureShown(window), kTimeout);
    QCOMPARE(combo->currentIndex(), 0);
    QVERIFY(picker->isVisible());
    const SessionSnapshot* shown = window.context().snapshot();
    QCOMPARE(shown->rank, int64_t{0});
    QCOMPARE(note->text(), QStringLiteral("holds KV head 0 of 2"));
    flush(window);
    QCOMPARE(headLabels(view->headBox()), QStringList{QStringLiteral("0")});
    QVERIFY(view->rowCount() > 0);
    QVERIFY2(view->csv() != rank1_rows, "rank 0's KV view shows rank 1's rows");
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QStringLiteral("shown: rank 0")), qPrintable(report));
    QVERIFY2(report.contains(QStringLiteral("the run's root cause is in rank 1")), qPrintable(report));

    // One file: nothing to pick.
    window.openCapture(QString::fromUtf8(kOneFile));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != shown && captureShown(window), kTimeout);
    QTRY_VERIFY(!picker->isVisible());
    QCOMPARE(window.context().snapshot()->rank, int64_t{-1});
    flush(window);
    QCOMPARE(view->headBox()->itemText(0), QStringLiteral("0"));
  }
};

QTEST_MAIN(RankPickerTest)
#include "rank_picker_test.moc"
