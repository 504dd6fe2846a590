// A hybrid model's capture in the GUI: the Row History panel lists every
// call's recurrent states (per recurrent layer, conv and SSM, the state the
// call resumed from and the one it left, with the position it is after and
// the tokens it folded in), marks the check's root cause (a `state` breach)
// with the rule's sentence, and is hidden for a capture without recurrent
// states. The fixture is hybrid_engine.py's shifted-snapshot rollback
// (tests/python/make_hybrid_fixture.py); what the test expects is read off
// the rule (docs/capture-format-v3.md, "Recurrent state"), not typed in.
#include <QLabel>
#include <QTableWidget>
#include <QtTest>
#include <set>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/RecurrentStatesView.h"
#include "ui/windows/RowHistoryPanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const char* const kHybrid = KVSCOPE_FIXTURES "/captures/hybrid-shifted-snapshot.kvcapture";
const char* const kAttentionOnly = KVSCOPE_FIXTURES "/captures/verify-mask-leak-dynamic-topk.kvcapture";

enum Column { Call, Inputs, Which, Layer, Kind, Id, After, Folded, Verdict };

bool captureShown(MainWindow& window) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  return snapshot != nullptr && snapshot->from_capture && !window.controller().busy();
}

QString cell(QTableWidget* table, int row, int column) { return table->item(row, column)->text(); }

// "19-23" or "19": the first position.
int64_t firstOf(const QString& span) { return span.section(QLatin1Char('-'), 0, 0).toLongLong(); }

}  // namespace

class RecurrentStatesTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("recurrent_states_test"); }

  void listsTheStatesAndMarksTheBreach() {
    MainWindowOptions options = fixtureOptions();
    options.open_file = kHybrid;
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(captureShown(window), kTimeout);
    const SessionSnapshot* snapshot = window.context().snapshot();
    QVERIFY(snapshot->diff && snapshot->diff->root_cause);
    const RootCause& cause = *snapshot->diff->root_cause;
    QCOMPARE(cause.kind, std::string("state"));
    window.rowHistoryPanel()->flushRefresh();
    RecurrentStatesView* view = window.rowHistoryPanel()->recurrentStates();
    QTRY_VERIFY(view->isVisible());
    QTableWidget* table = view->table();
    QVERIFY(table->rowCount() > 0);

    // Every recurrent layer of the model (hybrid_engine.py's LAYER_TYPES: 0 and 2) has both kinds.
    std::set<std::pair<QString, QString>> layer_kinds;
    int resumed_ok = 0;
    for (int r = 0; r < table->rowCount(); ++r) {
      layer_kinds.insert({cell(table, r, Layer), cell(table, r, Kind)});
      // A state resumed from and not marked keeps the rule: it is after the position before the call's first input.
      if (cell(table, r, Which) == QStringLiteral("resumed from") && cell(table, r, Verdict) == QStringLiteral("ok") &&
          firstOf(cell(table, r, Inputs)) > 0) {
        QCOMPARE(cell(table, r, After).toLongLong(), firstOf(cell(table, r, Inputs)) - 1);
        ++resumed_ok;
      }
      QVERIFY2(!cell(table, r, Folded).isEmpty(), "every state says what it folded in");
    }
    QVERIFY(resumed_ok > 0);
    const std::set<std::pair<QString, QString>> expected = {
        {QStringLiteral("0"), QStringLiteral("conv")}, {QStringLiteral("0"), QStringLiteral("ssm")},
        {QStringLiteral("2"), QStringLiteral("conv")}, {QStringLiteral("2"), QStringLiteral("ssm")}};
    QVERIFY(layer_kinds == expected);

    // The root cause's row: the call, layer and kind the check names, a state after the wrong position, selected.
    const int row = view->rootCauseRow();
    QVERIFY(row >= 0);
    QCOMPARE(cell(table, row, Verdict), QStringLiteral("ROOT CAUSE"));
    QCOMPARE(cell(table, row, Call), QStringLiteral("target %1").arg(cause.call));
    QCOMPARE(cell(table, row, Layer), QString::number(cause.layers.front()));
    QCOMPARE(cell(table, row, Kind), QString::fromStdString(cause.state_kind));
    QCOMPARE(cell(table, row, Which), QStringLiteral("resumed from"));
    QVERIFY(cell(table, row, After).toLongLong() != firstOf(cell(table, row, Inputs)) - 1);
    QVERIFY(table->selectionModel()->isRowSelected(row, {}));
    QVERIFY(view->breachLabel()->isVisible());
    QVERIFY2(view->breachLabel()->text().contains(QString::fromStdString(cause.what).toHtmlEscaped()),
             qPrintable(view->breachLabel()->text()));

    // A capture without recurrent states: nothing listed.
    window.openCapture(QString::fromUtf8(kAttentionOnly));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != snapshot && captureShown(window), kTimeout);
    window.rowHistoryPanel()->flushRefresh();
    QVERIFY(!view->isVisible());
    QCOMPARE(table->rowCount(), 0);
  }
};

QTEST_MAIN(RecurrentStatesTest)
#include "recurrent_states_test.moc"
