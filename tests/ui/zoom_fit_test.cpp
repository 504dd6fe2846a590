// Text that fits at every presenter zoom: every widget's font follows the
// zoom (also those that do not take their parent's font: the status bar, the
// workspace bar under its style sheet, item views) and the KV overview's
// painted digits; the audit grid's caption is elided to the grid, never cut
// at both ends, and its hover holds it whole; the diff report, when capped,
// shows whole lines only; the compression slots say "Run to see ..." before
// a run instead of drawing empty hatched axes; the Cache Diff's plots keep a
// readable height and their tick labels apart at 150% on 1024x768; the
// what-if box fits at 200% and its rows shrink back at 100%; the token strip
// draws larger on a lesson's stage.
#include <QAbstractTextDocumentLayout>
#include <QFontInfo>
#include <QStatusBar>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextLayout>
#include <QToolBar>
#include <QtTest>

#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/CompressionMetricsPlot.h"
#include "ui/widgets/CompressionSlotView.h"
#include "ui/widgets/LayerHeadOverview.h"
#include "ui/widgets/TokenStripWidget.h"
#include "ui/windows/CompressionPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/Workspaces.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {
int pixels(const QFont& font) { return QFontInfo(font).pixelSize(); }

QString describe(const QWidget* widget) {
  return QStringLiteral("%1 '%2'").arg(QString::fromUtf8(widget->metaObject()->className()), widget->objectName());
}
}  // namespace

class ZoomFitTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("zoom_fit_test"); }

  void everyWidgetsTextFollowsTheZoom() {
    MainWindowOptions options = fixtureOptions();
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    flush(window);
    QHash<QWidget*, int> at100;
    for (QWidget* widget : window.findChildren<QWidget*>()) at100.insert(widget, pixels(widget->font()));
    auto* overview = window.findChild<LayerHeadOverview*>(QStringLiteral("layerHeadOverview"));
    QVERIFY(overview != nullptr);
    const int overview_at100 = pixels(overview->labelFont());

    window.setPresenterZoom(150);
    flush(window);
    QStringList unzoomed;
    for (auto it = at100.cbegin(); it != at100.cend(); ++it) {
      // 1.5x, give or take the rounding of whole pixels.
      if (pixels(it.key()->font()) < it.value() * 1.5 - 1) {
        unzoomed << QStringLiteral("%1: %2 px -> %3 px").arg(describe(it.key())).arg(it.value()).arg(pixels(it.key()->font()));
      }
    }
    QVERIFY2(unzoomed.isEmpty(), qPrintable(unzoomed.join(QLatin1Char('\n'))));
    // The ones the review found at their 100% size, by name.
    auto* bar = window.findChild<QToolBar*>(QStringLiteral("workspaceBar"));
    QVERIFY(bar != nullptr);
    for (QWidget* button : bar->findChildren<QWidget*>()) QVERIFY2(pixels(button->font()) >= at100.value(button) * 1.5 - 1, qPrintable(describe(button)));
    QVERIFY(pixels(window.statusBar()->font()) >= at100.value(window.statusBar()) * 1.5 - 1);
    auto* table = window.findChild<QTableWidget*>(QStringLiteral("stepsKeyTable"));
    QVERIFY(table != nullptr);
    QVERIFY(pixels(table->font()) >= at100.value(table) * 1.5 - 1);
    QVERIFY2(pixels(overview->labelFont()) >= overview_at100 * 1.5 - 1,
             qPrintable(QStringLiteral("%1 -> %2 px").arg(overview_at100).arg(pixels(overview->labelFont()))));

    // Actual size gives every one back.
    window.setPresenterZoom(100);
    for (auto it = at100.cbegin(); it != at100.cend(); ++it) {
      QVERIFY2(pixels(it.key()->font()) == it.value(), qPrintable(describe(it.key())));
    }
    QCOMPARE(pixels(overview->labelFont()), overview_at100);
  }

  void theAuditCaptionIsElidedToTheGridAndHoveredWhole() {
    MainWindow window(fixtureOptions());
    window.resize(1024, 768);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    window.setPresenterZoom(150);
    DiffPanel* panel = window.diffPanel();
    window.dock(QStringLiteral("diffDock"))->raise();
    QTRY_VERIFY(panel->isVisible());
    flush(window);
    QCustomPlot* plot = panel->auditPlot();
    QVERIFY(!panel->auditCaption().isEmpty());
    QVERIFY(panel->auditAxisTitle().contains(panel->auditCaption()));
    for (int width : {plot->width(), 260}) {
      plot->setFixedWidth(width);
      QTRY_COMPARE(plot->width(), width);
      plot->replot();
      plot->replot();  // the second draws with the first's layout
      const QString shown = plot->xAxis->label();
      const int drawn = QFontMetrics(plot->xAxis->labelFont()).horizontalAdvance(shown);
      QVERIFY2(drawn <= plot->axisRect()->width(),
               qPrintable(QStringLiteral("'%1' is %2 px on a %3 px grid").arg(shown).arg(drawn).arg(plot->axisRect()->width())));
      QVERIFY2(shown == panel->auditAxisTitle() || shown.endsWith(QChar(0x2026)), qPrintable(shown));
    }
    QVERIFY(plot->xAxis->label() != panel->auditAxisTitle());  // 260 px is too narrow for all of it
  }

  void aCappedReportShowsWholeLines() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    QTextBrowser* report = window.diffPanel()->report();
    window.dock(QStringLiteral("diffDock"))->raise();
    QTRY_VERIFY(report->isVisible());
    // The first line the report's bottom cuts through, or nothing.
    const auto cutLine = [report]() -> QString {
      QTextDocument* document = report->document();
      const double visible = report->viewport()->height();
      for (QTextBlock block = document->begin(); block.isValid(); block = block.next()) {
        const double top = document->documentLayout()->blockBoundingRect(block).top();
        for (int i = 0; i < block.layout()->lineCount(); ++i) {
          const QTextLine line = block.layout()->lineAt(i);
          const double line_top = top + line.y(), line_bottom = line_top + line.height();
          if (line_bottom > visible + 0.5 && line_top < visible - 0.5) {
            return QStringLiteral("a line from %1 to %2 px is cut by the report's bottom at %3 px").arg(line_top).arg(line_bottom).arg(visible);
          }
        }
      }
      return QString();
    };
    for (int zoom : {100, 150, 200}) {
      window.setPresenterZoom(zoom);
      QTRY_VERIFY2(cutLine().isEmpty(), qPrintable(QStringLiteral("at %1%: %2").arg(zoom).arg(cutLine())));
    }
    window.setPresenterZoom(100);
  }

  void compressionSlotsSayRunBeforeARun() {
    MainWindowOptions options = fixtureOptions();
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    CompressionPanel* panel = window.compressionPanel();
    for (int slot = 0; slot < 2; ++slot) {
      const QString said = panel->slotView(slot)->placeholderText();
      QVERIFY2(said.startsWith(QStringLiteral("Run to see")), qPrintable(said));
    }
    QVERIFY(panel->metricsPlot()->placeholderText().startsWith(QStringLiteral("Run to see")));
    const auto before = panel->lastRun();
    panel->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(panel->lastRun() != before && !panel->pending(), kTimeout);
    flush(window);
    QVERIFY2(panel->slotView(0)->placeholderText().isEmpty(), qPrintable(panel->slotView(0)->placeholderText()));
    QVERIFY(panel->metricsPlot()->placeholderText().isEmpty());
  }

  void cacheDiffPlotsKeepTheirHeightAndTheirTicksApart() {
    MainWindowOptions options = fixtureOptions();
    options.size = QSize(1024, 768);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    window.setPresenterZoom(150);
    window.dock(QStringLiteral("diffDock"))->raise();
    DiffPanel* panel = window.diffPanel();
    QTRY_VERIFY(panel->isVisible());
    flush(window);
    const int line = QFontMetrics(panel->font()).height();
    for (QCustomPlot* plot : {panel->findChild<QCustomPlot*>(QStringLiteral("diffPlot")), panel->auditPlot()}) {
      QVERIFY(plot != nullptr);
      for (int i = 0; i < 3; ++i) {
        plot->replot();
        QApplication::processEvents();
      }
      QVERIFY2(plot->axisRect()->height() >= 2 * line,
               qPrintable(QStringLiteral("%1: %2 px tall").arg(plot->objectName()).arg(plot->axisRect()->height())));
      for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
        if (axis->scaleType() != QCPAxis::stLinear) continue;
        const QVector<double> ticks = axis->tickVector();
        const QVector<QString> labels = axis->tickVectorLabels();
        const QFontMetrics metrics(axis->tickLabelFont());
        for (int t = 1; t < ticks.size(); ++t) {
          const double apart = std::abs(axis->coordToPixel(ticks[t]) - axis->coordToPixel(ticks[t - 1]));
          const int need = axis->orientation() == Qt::Horizontal
                               ? (metrics.horizontalAdvance(labels[t]) + metrics.horizontalAdvance(labels[t - 1])) / 2
                               : metrics.height();
          QVERIFY2(apart >= need, qPrintable(QStringLiteral("%1: ticks '%2' and '%3' %4 px apart, their labels need %5")
                                                 .arg(plot->objectName(), labels[t - 1], labels[t]).arg(apart).arg(need)));
        }
      }
    }
    window.setPresenterZoom(100);
  }

  void theWhatIfBoxFitsAt200AndItsRowsComeBack() {
    MainWindowOptions options = fixtureOptions();
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);
    if (QTest::currentTestFailed()) return;
    window.workspaces()->switchTo(Workspace::Teach);
    window.dock(QStringLiteral("attentionStepsDock"))->raise();
    auto* table = window.findChild<QTableWidget*>(QStringLiteral("stepsKeyTable"));
    auto* box = window.findChild<QWidget*>(QStringLiteral("stepsWhatIf"));
    auto* button = window.findChild<QWidget*>(QStringLiteral("stepsRecompute"));
    QVERIFY(table && box && button);
    QTRY_VERIFY(box->isVisible());
    flush(window);
    QTRY_VERIFY(table->rowCount() > 0);
    const int row_at100 = table->rowHeight(0);
    window.setPresenterZoom(200);
    QApplication::processEvents();
    const QRect inner = QRect(button->mapTo(box, QPoint(0, 0)), button->size());
    QVERIFY2(box->parentWidget()->width() >= box->width(), "the box is wider than its card column");
    QVERIFY2(box->rect().contains(inner), qPrintable(QStringLiteral("Recompute at %1,%2 %3x%4 in a %5 px box")
                                                           .arg(inner.x()).arg(inner.y()).arg(inner.width()).arg(inner.height()).arg(box->width())));
    QVERIFY(button->width() >= button->sizeHint().width());
    QVERIFY(table->rowHeight(0) > row_at100);
    window.setPresenterZoom(100);
    QApplication::processEvents();
    QCOMPARE(table->rowHeight(0), row_at100);
  }

  void theTokenStripFillsALessonsStage() {
    MainWindowOptions options = fixtureOptions();
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    auto* strip = window.findChild<TokenStripWidget*>(QStringLiteral("tokenStrip"));
    QVERIFY(strip != nullptr);
    window.workspaces()->switchTo(Workspace::Teach);
    window.dock(QStringLiteral("tokensDock"))->raise();
    flush(window);
    QTRY_VERIFY(strip->isVisible() && strip->tokenScale() > 1.0);
    // Larger, and still all on the stage without scrolling.
    QVERIFY(strip->itemRect(strip->items().size() - 1).bottom() <= strip->parentWidget()->height());
    window.workspaces()->switchTo(Workspace::Debug);  // a short dock: the usual size
    window.dock(QStringLiteral("tokensDock"))->raise();
    QTRY_VERIFY(strip->isVisible() && strip->tokenScale() == 1.0);
  }
};

QTEST_MAIN(ZoomFitTest)
#include "zoom_fit_test.moc"
