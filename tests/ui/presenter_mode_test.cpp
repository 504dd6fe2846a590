// Presenter mode and explanations in the app: the presenter zoom
// scales the window's fonts, plot labels and markers (and 100% gives them
// back exactly); Run's playback speed pauses after every phase (a lower
// bound on the time, measured); the toolbar says its keys and a first start
// shows the hint line; Help > Glossary has the panels' terms; a diff run with
// a fault explains the fault and the real bug it mirrors.
#include <QComboBox>
#include <QDialog>
#include <QTimer>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QSettings>
#include <QTextBrowser>
#include <QToolBar>
#include <QToolButton>
#include <QtTest>

#include <qcustomplot.h>

#include "core/cache/fault.h"
#include "tests/ui/ui_test_support.h"
#include "ui/widgets/HoverCellHighlight.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/GlossaryDialog.h"
#include "ui/windows/LessonPanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {
QCPGraph* firstScatterGraph(QCustomPlot* plot) {
  for (int i = 0; i < plot->graphCount(); ++i) {
    if (!plot->graph(i)->scatterStyle().isNone()) return plot->graph(i);
  }
  return nullptr;
}
}  // namespace

class PresenterModeTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    useTestSettings("presenter_mode_test");
    QSettings().clear();  // a first start
  }

  void zoomScalesFontsPlotLabelsAndMarkers() {
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCOMPARE(window.presenterZoom(), 100);
    QCustomPlot* kv = window.kvCachePanel()->targetView()->plot();
    QCustomPlot* diff = window.diffPanel()->findChild<QCustomPlot*>(QStringLiteral("diffPlot"));
    QVERIFY(diff != nullptr);
    auto* title = window.lessonPanel()->findChild<QLabel*>(QStringLiteral("lessonTitle"));  // a font of its own
    QCPGraph* markers = firstScatterGraph(diff);
    QVERIFY(markers != nullptr);
    const double window_pt = window.font().pointSizeF();
    const double tick_pt = kv->yAxis->tickLabelFont().pointSizeF();
    const double label_pt = diff->xAxis->labelFont().pointSizeF();
    const double title_pt = title->font().pointSizeF();
    const double marker = markers->scatterStyle().size();
    const double button_pt = window.diffPanel()->runButton()->font().pointSizeF();

    window.setPresenterZoom(150);
    QCOMPARE(window.presenterZoom(), 150);
    QCOMPARE(window.font().pointSizeF(), window_pt * 1.5);
    QCOMPARE(window.diffPanel()->runButton()->font().pointSizeF(), button_pt * 1.5);  // inherited
    QCOMPARE(kv->yAxis->tickLabelFont().pointSizeF(), tick_pt * 1.5);
    QCOMPARE(diff->xAxis->labelFont().pointSizeF(), label_pt * 1.5);
    QCOMPARE(title->font().pointSizeF(), title_pt * 1.5);
    QCOMPARE(markers->scatterStyle().size(), marker * 1.5);
    // The keyboard: Ctrl+= one step up, Ctrl+- one down, capped at 200%.
    QTest::keyClick(&window, Qt::Key_Equal, Qt::ControlModifier);
    QCOMPARE(window.presenterZoom(), 175);
    QCOMPARE(kv->yAxis->tickLabelFont().pointSizeF(), tick_pt * 1.75);
    window.setPresenterZoom(400);
    QCOMPARE(window.presenterZoom(), 200);
    QTest::keyClick(&window, Qt::Key_Minus, Qt::ControlModifier);
    QCOMPARE(window.presenterZoom(), 175);
    // 100% gives every size back exactly.
    window.setPresenterZoom(100);
    QCOMPARE(window.font().pointSizeF(), window_pt);
    QCOMPARE(kv->yAxis->tickLabelFont().pointSizeF(), tick_pt);
    QCOMPARE(title->font().pointSizeF(), title_pt);
    QCOMPARE(markers->scatterStyle().size(), marker);
  }

  void zoomIsRememberedAndTakenFromTheOptions() {
    {
      MainWindowOptions options = fixtureOptions();
      options.load_on_start = false;
      MainWindow window(options);
      window.setPresenterZoom(125);
    }
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow remembered(options);
    QCOMPARE(remembered.presenterZoom(), 125);
    options.presenter_zoom = 150;  // --presenter: this run only
    {
      MainWindow presenter(options);
      QCOMPARE(presenter.presenterZoom(), 150);
    }
    options.presenter_zoom = 0;
    MainWindow after(options);
    QCOMPARE(after.presenterZoom(), 125);
    after.setPresenterZoom(100);
  }

  void playbackSpeedPausesAfterEveryPhase() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    SessionSpec spec = *window.sessionPanel()->sessionSpec();
    spec.options.max_new_tokens = 6;
    const SessionSnapshot* before = window.context().snapshot();
    window.controller().startSession(spec);
    waitForSnapshot(window, before);
    constexpr int kDelayMs = 150;
    window.phaseDelayBox()->setValue(kDelayMs / 1000.0);
    QCOMPARE(window.controller().phaseDelay(), kDelayMs);
    int snapshots = 0;
    connect(&window.controller(), &EngineController::snapshotReady, this, [&] { ++snapshots; });
    QElapsedTimer timer;
    timer.start();
    window.runAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->finished && !window.controller().running(), kTimeout);
    const qint64 elapsed = timer.elapsed();
    const SessionSnapshot& snapshot = *window.context().snapshot();
    // Every round ran draft, verify, accept, prune; each phase paused after.
    const int64_t phases = 4 * snapshot.lastRound();
    QVERIFY(phases >= 4);
    QVERIFY2(elapsed >= phases * kDelayMs,
             qPrintable(QStringLiteral("%1 phases took %2 ms, at least %3 expected").arg(phases).arg(elapsed).arg(phases * kDelayMs)));
    QVERIFY2(snapshots >= phases, qPrintable(QStringLiteral("%1 snapshots for %2 phases").arg(snapshots).arg(phases)));  // each phase shown
    window.phaseDelayBox()->setValue(0);
    QCOMPARE(window.controller().phaseDelay(), 0);
  }

  void toolbarShowsItsKeysAndAFirstStartShowsTheHint() {
    QSettings().remove(QStringLiteral("hints"));
    MainWindow window(fixtureOptions());
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    auto* bar = window.findChild<QToolBar*>(QStringLiteral("debugToolbar"));
    QVERIFY(bar != nullptr);
    auto* step = qobject_cast<QToolButton*>(bar->widgetForAction(window.stepPhaseAction()));
    QVERIFY(step != nullptr);
    QCOMPARE(step->text(), QStringLiteral("Step Phase (F10)"));
    for (QAction* action : bar->actions()) {
      if (action->shortcut().isEmpty()) continue;
      const QString key = action->shortcut().toString(QKeySequence::NativeText);
      QVERIFY2(action->toolTip().contains(key) || action->iconText().contains(key), qPrintable(action->text()));
    }
    QVERIFY(window.firstStartHint()->isVisible());
    QVERIFY(window.firstStartHint()->text().contains(QStringLiteral("F10: step one phase")));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && window.stepPhaseAction()->isEnabled(), kTimeout);
    window.stepPhaseAction()->trigger();
    QVERIFY(!window.firstStartHint()->isVisible());
    MainWindow second(fixtureOptions());  // seen once: not again
    second.show();
    QVERIFY(!second.firstStartHint()->isVisible());
  }

  void theHoveredCellIsOutlined() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    flush(window);
    for (QCustomPlot* plot : {window.kvCachePanel()->targetView()->plot(), window.attentionPanel()->plot()}) {
      auto* pointer = plot->findChild<HoverCellHighlight*>();
      QVERIFY2(pointer != nullptr, qPrintable(plot->objectName()));
      if (plot == window.attentionPanel()->plot()) {
        stepRound(window);  // verify attention exists from round 1
        window.dock(QStringLiteral("attentionDock"))->raise();
      }
      QTRY_VERIFY(plot->isVisible());
      // A raised dock is laid out after the raise returns: the cell's pixel is
      // taken again on every try, so a resize between the two cannot move it.
      const auto hoverCell = [&] {
        plot->replot();
        QTest::mouseMove(plot, QPoint(1, 1));
        QTest::mouseMove(plot, QPoint(static_cast<int>(plot->xAxis->coordToPixel(2)),
                                      static_cast<int>(plot->yAxis->coordToPixel(1))));
        return pointer->shown() && pointer->outline()->topLeft->coords() == QPointF(1.5, 0.5);
      };
      QTRY_VERIFY(hoverCell());
      QCOMPARE(pointer->outline()->bottomRight->coords(), QPointF(2.5, 1.5));
      QEvent leave(QEvent::Leave);
      QApplication::sendEvent(plot, &leave);
      QVERIFY(!pointer->shown());
    }
  }

  void glossaryHasThePanelsTerms() {
    const QString html = glossaryHtml();
    for (const char* term : {"alpha", "bonus", "correction", "gamma", "prune", "row", "stale", "KL", "margin", "position",
                             "kv head", "rotary", "root cause", "max |"}) {
      QVERIFY2(html.contains(QString::fromUtf8(term)), term);
    }
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::keyClick(&window, Qt::Key_F1);
    auto* glossary = window.findChild<QDialog*>(QStringLiteral("glossaryDialog"));
    QVERIFY(glossary && glossary->isVisible());
    QVERIFY(glossary->findChild<QTextBrowser*>()->toPlainText().contains(QStringLiteral("bonus")));
    QVERIFY(aboutText().contains(QStringLiteral("README")));
  }

  void aDiffWithAFaultExplainsTheFault() {
    MainWindow window(fixtureOptions());
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    const FaultInfo& info = faultInfo(parseFault("prune-short"));
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QString::fromUtf8(info.real_world).left(40)), qPrintable(report));
    QVERIFY2(report.contains(QString::fromUtf8(info.breaks).left(40)), qPrintable(report));
    // The second diff replaces the first, unsaved: answer Discard.
    QTimer discard;
    connect(&discard, &QTimer::timeout, this, [] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (box && box->objectName() == "saveFirstDialog") box->button(QMessageBox::Discard)->click();
    });
    discard.start(10);
    runDiff(window, "none");
    discard.stop();
    if (QTest::currentTestFailed()) return;
    QVERIFY(!window.diffPanel()->report()->toPlainText().contains(QStringLiteral("Real bug it mirrors")));
    // And the fault picker explains every fault before it is chosen.
    auto* picker = window.sessionPanel()->findChild<QComboBox*>(QStringLiteral("fault"));
    QVERIFY(picker != nullptr);
    for (int i = 1; i < picker->count(); ++i) {
      QVERIFY(picker->itemData(i, Qt::ToolTipRole).toString().contains(QStringLiteral("Real world")));
    }
  }
};

QTEST_MAIN(PresenterModeTest)
#include "presenter_mode_test.moc"
