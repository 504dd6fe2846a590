// Captures in the GUI: File > Save Capture writes the live session in the
// format other engines write; `kvscope FILE.kvcapture` opens one, checks it
// against the loaded models and shows the root cause first, with the calls
// the engine made named in the diff report and the row history. A broken
// capture is an error dialog that keeps the session.
#include <QAction>
#include <QFile>
#include <QTextBrowser>
#include <QtTest>
#include <qcustomplot.h>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/RowHistoryPanel.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/Workspaces.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class CaptureViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("capture_view_test"); }

  void savedCaptureOpensAtItsRootCause() {
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-ui-%1.kvcapture").arg(QCoreApplication::applicationPid()));
    QFile::remove(path);
    RootCause diff_cause;
    {
      MainWindow window(fixtureOptions());
      runDiff(window, "prune-short");
      if (QTest::currentTestFailed()) return;
      QVERIFY(window.context().snapshot()->diff->root_cause.has_value());
      diff_cause = *window.context().snapshot()->diff->root_cause;
      window.controller().saveCapture(path);
      QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && !window.controller().busy(), kTimeout);
      QVERIFY(errorDialog() == nullptr);
    }
    MainWindowOptions options = fixtureOptions();
    options.open_file = path;  // `kvscope FILE.kvcapture`: the models load, then the capture opens
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && window.context().snapshot()->from_capture &&
                                 !window.controller().busy(),
                             kTimeout);
    QTRY_VERIFY_WITH_TIMEOUT(window.windowTitle().contains(QStringLiteral("(capture)")), kTimeout);
    flush(window);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QVERIFY(snapshot.replay_only);
    QVERIFY2(snapshot.notes.empty(), snapshot.notes.empty() ? "" : snapshot.notes.front().c_str());
    QVERIFY(snapshot.diff && snapshot.diff->root_cause);
    const RootCause& cause = *snapshot.diff->root_cause;
    // Found from the capture alone, where kvscope's own diff put it.
    QCOMPARE(cause.cache, diff_cause.cache);
    QCOMPARE(cause.round, diff_cause.round);
    QCOMPARE(cause.phase, diff_cause.phase);
    // The root cause first: the cursor went there.
    QCOMPARE(window.context().cursor().round, cause.round);
    QCOMPARE(window.context().cursor().phase, cause.phase);
    QCOMPARE(window.context().cursor().cache, cause.cache);
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QStringLiteral("In the engine's calls")), qPrintable(report));
    QVERIFY2(report.contains(QStringLiteral(" call ")), qPrintable(report));
    QVERIFY(!window.diffPanel()->runButton()->isEnabled());
    QVERIFY(!window.diffPanel()->auditButton()->isEnabled());
    QVERIFY(window.kvCachePanel()->targetView()->rowCount() > 0);
    const QString history = window.rowHistoryPanel()->text()->toPlainText();
    QVERIFY2(history.contains(QStringLiteral(" call ")), qPrintable(history));
    // The wrong row's history names the operation that is the root cause.
    QVERIFY2(history.contains(QStringLiteral("this operation is the root cause")), qPrintable(history));
    // The timeline names the engine's calls of the cursor's round.
    const QString calls = TimelinePanel::callsOfRound(snapshot, cause.round);
    QVERIFY2(calls.contains(QStringLiteral("call")), qPrintable(calls));
    // ... in a line above the plot, for the cursor's round (drawn over the bars, it hid them).
    flush(window);
    const QString line = window.timelinePanel()->callsLine();
    QVERIFY2(line.contains(TimelinePanel::callsOfRound(snapshot, window.context().cursor().round)), qPrintable(line));
    QVERIFY2(window.timelinePanel()->findChildren<QCPItemText*>().isEmpty(), "a text item over the timeline's bars");
    // Verify Attention: recomputed over the captured rows of the verify rounds.
    QVERIFY(!snapshot.attention.empty());
    // Nothing to step after the capture's last call.
    window.context().setCursor(window.context().latest());
    QVERIFY(!window.stepRoundAction()->isEnabled());
    QCOMPARE(window.workspaces()->current(), Workspace::Capture);  // opening a capture switches there
    {
      // ... unless the command line named a workspace: `kvscope --workspace debug FILE`.
      MainWindowOptions debug = options;
      debug.workspace = QStringLiteral("debug");
      MainWindow in_debug(debug);
      QTRY_VERIFY_WITH_TIMEOUT(in_debug.windowTitle().contains(QStringLiteral("(capture)")) && !in_debug.controller().busy(),
                               kTimeout);
      QCOMPARE(in_debug.workspaces()->current(), Workspace::Debug);
    }
    QFile::remove(path);
  }

  void brokenCaptureIsAnErrorThatKeepsTheSession() {
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-ui-broken-%1.kvcapture").arg(QCoreApplication::applicationPid()));
    {
      QFile file(path);
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write("\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":", 24);
    }
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    const SnapshotPtr before = window.context().snapshotPtr();
    window.openCapture(path);
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    QVERIFY2(errorDialog()->informativeText().contains(QStringLiteral("kvscope-ui-broken")),
             qPrintable(errorDialog()->informativeText()));
    errorDialog()->accept();
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller().busy(), kTimeout);
    QCOMPARE(window.context().snapshot(), before.get());
    QVERIFY(!window.context().snapshot()->from_capture);
    QFile::remove(path);
  }
};

QTEST_MAIN(CaptureViewTest)
#include "capture_view_test.moc"
