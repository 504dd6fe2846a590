// Captures in every panel: the fixture captures (tests/fixtures/captures,
// written by the Python recorder, capture/python) name their target by a
// path from the machine that recorded them.
// - Attention Step by Step explains a capture's moment with the loaded target
//   when it is the captured checkpoint (config and embedding fingerprint),
//   whatever path the capture names it by; another model is refused with
//   the difference named.
// - Cache Diff never points at a disabled control (a clean capture, a trace
//   saved without a diff), and its plot shows the rows the header counts.
// - The Session panel does not present the loaded models as the capture's,
//   and a capture's rounds are named as the engine's target calls.
#include <QGroupBox>
#include <QLabel>
#include <QTextBrowser>
#include <QtTest>
#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const char* const kLeakCapture = KVSCOPE_FIXTURES "/captures/verify-mask-leak-dynamic-topk.kvcapture";
const char* const kCleanCapture = KVSCOPE_FIXTURES "/captures/greedy-static-full.kvcapture";

void openCapture(MainWindow& window) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && window.context().snapshot()->from_capture &&
                               !window.controller().busy(),
                           kTimeout);
  flush(window);
}

// Every disabled button of the Cache Diff panel: its label appears in no help text the panel shows.
void noHelpNamesADisabledButton(MainWindow& window, const char* where) {
  DiffPanel* panel = window.diffPanel();
  const QString help = panel->report()->toPlainText() + QLatin1Char('\n') + panel->auditCaption();
  for (QPushButton* button : {panel->runButton(), panel->auditButton(), panel->goToRootCauseButton(), panel->goToBadCellButton()}) {
    if (button->isEnabled()) continue;
    QVERIFY2(!help.contains(button->text()), qPrintable(QStringLiteral("%1: '%2' is disabled, the help says: %3")
                                                            .arg(QString::fromUtf8(where), button->text(), help)));
  }
}

}  // namespace

class CapturePanelsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("capture_panels_test"); }

  void attentionStepsExplainsACaptureOfTheLoadedModel() {
    MainWindowOptions options = fixtureOptions();
    options.open_file = kLeakCapture;
    MainWindow window(options);
    openCapture(window);
    if (QTest::currentTestFailed()) return;
    // The capture names llama-tiny by a path that does not exist here.
    QVERIFY(!QFileInfo::exists(QString::fromStdString(window.context().snapshot()->target_name)));
    AttentionStepsPanel* panel = window.attentionStepsPanel();
    window.context().setLayerHead(CacheRole::Target, 1, 0);
    window.context().selectPosition(3);
    panel->flushRefresh();
    QTRY_VERIFY2_WITH_TIMEOUT(panel->explanation() != nullptr && panel->explanation()->request.position == 3,
                              qPrintable(panel->statusText()), kTimeout);
    QVERIFY2(panel->statusText().contains(QStringLiteral("explained with the loaded target")), qPrintable(panel->statusText()));

    // Another model loaded: refused, naming what differs (never two equal descriptions).
    MainWindowOptions other = fixtureOptions();
    other.models.target_dir = KVSCOPE_FIXTURES "/models/qwen2-tiny";
    other.models.drafter_dir = KVSCOPE_FIXTURES "/models/qwen2-tiny";
    other.open_file = kLeakCapture;
    MainWindow second(other);
    openCapture(second);
    if (QTest::currentTestFailed()) return;
    second.context().selectPosition(3);
    second.attentionStepsPanel()->flushRefresh();
    QTRY_VERIFY_WITH_TIMEOUT(second.attentionStepsPanel()->statusText().contains(QStringLiteral("is not the model")), kTimeout);
    const QString refused = second.attentionStepsPanel()->statusText();
    QVERIFY2(refused.contains(QStringLiteral("qwen2-tiny")) && refused.contains(QStringLiteral("llama")), qPrintable(refused));
    QVERIFY2(refused.contains(QStringLiteral("the capture says")) || refused.contains(QStringLiteral("differ")), qPrintable(refused));
    QVERIFY(second.attentionStepsPanel()->explanation() == nullptr);
  }

  void cleanCaptureHelpAndPlot() {
    MainWindowOptions options = fixtureOptions();
    options.open_file = kCleanCapture;
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    openCapture(window);
    if (QTest::currentTestFailed()) return;
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QVERIFY(snapshot.diff != nullptr);
    QVERIFY2(!snapshot.diff->root_cause, "the fixture is a clean capture");
    noHelpNamesADisabledButton(window, "a clean capture");
    // Every cursor moment: the caption follows the cursor.
    for (int64_t round = 0; round <= snapshot.lastRound(); ++round) {
      window.context().goToRound(round);
      flush(window);
      noHelpNamesADisabledButton(window, "a clean capture, another round");
    }
    // The header's compared rows: points in the plot's visible range.
    DiffPanel* panel = window.diffPanel();
    const QString report = panel->report()->toPlainText();
    QVERIFY2(report.contains(QStringLiteral("logit rows match the reference")), qPrintable(report));
    QVERIFY2(snapshot.diff->agree > 0, qPrintable(report));
    QCustomPlot* plot = panel->findChild<QCustomPlot*>(QStringLiteral("diffPlot"));
    QVERIFY(plot != nullptr);
    int shown = 0;
    for (int g = 0; g < plot->graphCount(); ++g) {
      QCPGraph* graph = plot->graph(g);
      for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
        const bool inside = graph->keyAxis()->range().contains(it->key) && graph->valueAxis()->range().contains(it->value);
        shown += inside ? 1 : 0;
      }
    }
    QVERIFY(shown >= panel->pointCount());
    // Every row the header counts is a point (the check keeps the rows it
    // compared), so the plot needs no note standing in for them.
    QCOMPARE(static_cast<int64_t>(panel->pointCount()), snapshot.diff->agree + snapshot.diff->divergent);
    QVERIFY2(panel->plotNote().isEmpty(), qPrintable(panel->plotNote()));
  }

  void aTraceWithoutADiffNamesNoDisabledButton() {
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-panels-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);
    if (QTest::currentTestFailed()) return;
    window.saveTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && !window.controller().busy(), kTimeout);
    window.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->replay_only &&
                                 !window.controller().busy(), kTimeout);
    flush(window);
    QVERIFY(!window.diffPanel()->runButton()->isEnabled());
    noHelpNamesADisabledButton(window, "a trace without a diff");
    QFile::remove(path);
  }

  void sessionPanelAndRoundsSpeakOfTheCapture() {
    MainWindowOptions options;  // the bundled pair: not the capture's models
    options.restore_layout = false;
    options.open_file = kLeakCapture;
    MainWindow window(options);
    openCapture(window);
    if (QTest::currentTestFailed()) return;
    auto* models = window.sessionPanel()->findChild<QGroupBox*>(QStringLiteral("modelsBox"));
    QVERIFY(models != nullptr);
    QVERIFY2(models->title().contains(QStringLiteral("not the file's")), qPrintable(models->title()));
    auto* shown = window.sessionPanel()->findChild<QLabel*>(QStringLiteral("sessionShown"));
    QVERIFY(shown && shown->text().contains(QStringLiteral("llama-tiny")));
    // The status bar names the cursor's round by the engine's target call.
    const SessionSnapshot& snapshot = *window.context().snapshot();
    window.context().goToRound(snapshot.lastRound());
    flush(window);
    auto* cursor = window.findChild<QLabel*>(QStringLiteral("cursorLabel"));
    QVERIFY(cursor != nullptr);
    QTRY_VERIFY2(cursor->text().contains(QStringLiteral("target call")), qPrintable(cursor->text()));
    QVERIFY2(!cursor->text().contains(QStringLiteral("round ")), qPrintable(cursor->text()));
    // A live session afterwards: rounds again, and the models are the session's.
    window.sessionPanel()->findChild<QPushButton*>(QStringLiteral("startSession"))->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && !window.context().snapshot()->replay_only &&
                                 !window.controller().busy(), kTimeout);
    QCOMPARE(models->title(), QStringLiteral("Models"));
  }
};

QTEST_MAIN(CapturePanelsTest)
#include "capture_panels_test.moc"
