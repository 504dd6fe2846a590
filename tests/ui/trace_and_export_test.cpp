// Saving and reopening a .kvtrace (no models needed to reopen), a corrupt
// trace, and exporting plots and tables.
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QTextBrowser>
#include <QtTest>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/PlotExport.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class TraceAndExportTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("trace_and_export_test"); }

  void savedTraceReopensAtTheSameRoundAndSelection() {
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-ui-test-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    int64_t round = -1, position = -1, entries = 0, rows = 0;
    {
      MainWindow window(fixtureOptions());
      QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
      stepRound(window);
      stepRound(window);
      stepRound(window);
      window.context().goToRound(2);
      window.context().selectPosition(window.context().snapshot()->prompt_length);
      window.context().toggleBookmark(3);
      flush(window);
      round = window.context().cursor().round;
      position = window.context().cursor().position;
      entries = static_cast<int64_t>(window.context().snapshot()->entries.size());
      rows = window.kvCachePanel()->targetView()->rowCount();
      window.saveTrace(path);
      QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && !window.controller().busy(), kTimeout);
    }
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;  // a saved trace opens without the models
    MainWindow window(options);
    window.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QTRY_COMPARE_WITH_TIMEOUT(window.context().cursor().round, round, kTimeout);
    QCOMPARE(window.context().cursor().position, position);
    QCOMPARE(int(window.context().bookmarks().size()), 1);
    QVERIFY(window.context().snapshot()->replay_only);
    QCOMPARE(int64_t(window.context().snapshot()->entries.size()), entries);
    flush(window);
    QCOMPARE(window.kvCachePanel()->targetView()->rowCount(), rows);
    QVERIFY(window.stepRoundAction()->isEnabled());  // through the recorded rounds
    window.context().setCursor(window.context().latest());
    QVERIFY(!window.stepRoundAction()->isEnabled());  // a replay has nothing after its last moment
    QFile::remove(path);
  }

  void savedDiffReopensWithTheRootCauseAndSelection() {
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-ui-diff-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    std::string what, prompt;
    Cursor saved;
    RowHistory history;
    {
      MainWindow window(fixtureOptions());
      runDiff(window, "prune-short");
      if (QTest::currentTestFailed()) return;
      QVERIFY(window.context().snapshot()->diff->root_cause.has_value());
      what = window.context().snapshot()->diff->root_cause->what;
      prompt = window.context().snapshot()->prompt;
      window.diffPanel()->goToRootCauseButton()->click();
      Cursor cursor = window.context().cursor();
      cursor.layer = 1;  // the investigation moved on: another layer and head, same row
      cursor.head = 1;
      window.context().setCursor(cursor);
      window.context().toggleBookmark(2);
      window.kvCachePanel()->setShowingValues(true);
      flush(window);
      saved = window.context().cursor();
      QVERIFY(saved.entry >= 0 && saved.row >= 0);
      history = window.rowHistoryPanel()->history();
      window.saveTrace(path);
      QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && !window.controller().busy(), kTimeout);
    }
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;  // no models: the same diff view, root cause and selection
    MainWindow window(options);
    window.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().cursor() == saved, 20000);
    flush(window);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QVERIFY(snapshot.replay_only);
    QVERIFY(snapshot.diff != nullptr);
    QVERIFY(snapshot.diff->root_cause.has_value());
    QCOMPARE(snapshot.diff->root_cause->what, what);
    QVERIFY(window.diffPanel()->report()->toPlainText().contains(QString::fromStdString(what)));
    QVERIFY(window.diffPanel()->goToRootCauseButton()->isEnabled());
    QCOMPARE(window.context().bookmarks(), QVector<int64_t>{2});
    QVERIFY(window.kvCachePanel()->showingValues());
    QCOMPARE(window.rowHistoryPanel()->history().entry, history.entry);
    QCOMPARE(window.rowHistoryPanel()->history().events.size(), history.events.size());
    QCOMPARE(int64_t{window.kvCachePanel()->targetView()->layer()}, saved.layer);
    QCOMPARE(int64_t{window.attentionPanel()->kvHead()}, saved.head);
    // The Session form shows what the trace ran with.
    QCOMPARE(window.sessionPanel()->sessionSpec()->options.fault, Fault::PruneShort);
    QCOMPARE(window.sessionPanel()->prompt().toStdString(), prompt);
    QFile::remove(path);
  }

  void badTraceShowsError() {
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow window(options);
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-ui-bad-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("not a trace");
    file.close();
    window.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    errorDialog()->accept();
    QVERIFY(window.context().snapshot() == nullptr);
    QFile::remove(path);
  }

  void exportsPlotsAndCsv() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    stepRound(window);
    window.show();
    flush(window);
    const QString csv = window.kvCachePanel()->targetView()->csv();
    QCOMPARE(int(csv.count(QLatin1Char('\n'))), window.kvCachePanel()->targetView()->rowCount() + 1);
    QVERIFY(window.timelinePanel()->csv().startsWith("round,"));
    QCOMPARE(int(window.timelinePanel()->csv().count(QLatin1Char('\n'))), 2);
    const QString png = QDir::temp().filePath(QStringLiteral("kvscope-ui-export-%1.png").arg(QCoreApplication::applicationPid()));
    QVERIFY(exportPlot(window.kvCachePanel()->targetView()->plot(), png));
    QVERIFY(QFileInfo(png).size() > 1000);
    QFile::remove(png);
  }
};

QTEST_MAIN(TraceAndExportTest)
#include "trace_and_export_test.moc"
