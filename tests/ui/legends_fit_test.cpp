// Legends and labels that were cut: at 1024x768 and 1280x720, at 100% and
// 150% presenter zoom, every legend under a plot (Cache Diff's audit legend,
// Verify Attention's, the Round Timeline's, the KV Cache's) shows all its lines and no line
// is wider than its widget; the audit grid's cells answer a hover; a verdict
// reads as words ("wrong position"), not an identifier in capitals.
#include <QLabel>
#include <QTextDocument>
#include <QtTest>
#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/Palette.h"
#include "ui/windows/KvCachePanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

// The label's text laid out at its width in its font: every line fits the
// width (a word wider than the label would be cut) and the label is as tall
// as the lines (none hidden below it).
void fits(QLabel* label, const QString& where) {
  QVERIFY2(label != nullptr, qPrintable(where));
  QTextDocument document;
  document.setDefaultFont(label->font());
  document.setDocumentMargin(0);
  document.setHtml(label->text());
  // An unwrapped label draws one line however long: it must fit as it is.
  document.setTextWidth(label->wordWrap() ? label->contentsRect().width() : -1);
  QVERIFY2(document.idealWidth() <= label->contentsRect().width() + 1,
           qPrintable(QStringLiteral("%1: %2: a line of %3 px in %4 px")
                          .arg(where, label->objectName())
                          .arg(document.idealWidth())
                          .arg(label->contentsRect().width())));
  // Every word of the text is shown (the label is not elided or cut).
  QVERIFY2(label->height() + 1 >= label->heightForWidth(label->width()),
           qPrintable(QStringLiteral("%1: %2: %3 px tall, its lines need %4")
                          .arg(where, label->objectName())
                          .arg(label->height())
                          .arg(label->heightForWidth(label->width()))));
  const QFontMetrics metrics(label->font());
  QVERIFY2(label->height() >= metrics.height(), qPrintable(where + ": " + label->objectName() + " shows no line"));
}

void raise(MainWindow& window, const char* dock) {
  QDockWidget* d = window.dock(QString::fromUtf8(dock));
  QVERIFY(d != nullptr);
  d->show();
  d->raise();
  QApplication::processEvents();
  QTest::qWait(50);
}

}  // namespace

class LegendsFitTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("legends_fit_test"); }

  void legendsFitAtProjectorSizesAndZooms() {
    MainWindow window(fixtureOptions());
    window.show();
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    window.diffPanel()->goToRootCauseButton()->click();  // the moment the stale row is drawn
    flush(window);
    for (const QSize size : {QSize(1024, 768), QSize(1280, 720)}) {
      for (const int zoom : {100, 150}) {
        window.resize(size);
        window.setPresenterZoom(zoom);
        window.resetLayout();
        QTest::qWait(200);
        flush(window);
        const QString where = QStringLiteral("%1x%2 at %3%").arg(size.width()).arg(size.height()).arg(zoom);
        raise(window, "diffDock");
        fits(window.findChild<QLabel*>(QStringLiteral("diffLegend")), where);
        raise(window, "attentionDock");
        fits(window.findChild<QLabel*>(QStringLiteral("attentionLegend")), where);
        fits(window.findChild<QLabel*>(QStringLiteral("attentionInfo")), where);  // the header: a shorter form, not a cut one
        raise(window, "timelineDock");
        fits(window.findChild<QLabel*>(QStringLiteral("timelineLegend")), where);
        raise(window, "kvDock");
        fits(window.findChild<QLabel*>(QStringLiteral("kvLegend")), where);
        // The KV legend keys exactly the verdicts its views draw (here the fault's stale row).
        const QString kv_legend = window.findChild<QLabel*>(QStringLiteral("kvLegend"))->text();
        for (RowState state : {RowState::Stale, RowState::Missing, RowState::Duplicate, RowState::WrongPosition, RowState::WrongValues}) {
          const bool drawn = window.kvCachePanel()->targetView()->countState(state) > 0 ||
                             window.kvCachePanel()->drafterView()->countState(state) > 0;
          const QString name = Palette::rowStateLabel(state).replace(QLatin1Char(' '), QStringLiteral("&nbsp;"));
          QVERIFY2(kv_legend.contains(name) == drawn, qPrintable(where + ": KV legend and drawn rows disagree on " + name));
        }
        QVERIFY2(kv_legend.contains(QStringLiteral("stale")), qPrintable(where + ": prune-short's stale row has no key"));
        // At the laptop size and zoom it is one line (beside the controls or under them), not a column of keys.
        QLabel* kv = window.findChild<QLabel*>(QStringLiteral("kvLegend"));
        if (size == QSize(1280, 720) && zoom == 100) {
          QVERIFY2(kv->height() < 2 * QFontMetrics(kv->font()).height(), qPrintable(where + ": the KV legend takes more than a line"));
        }
        if (QTest::currentTestFailed()) return;
      }
    }
  }

  void auditCellsAnswerAHoverInWords() {
    MainWindow window(fixtureOptions());
    window.show();
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    DiffPanel* panel = window.diffPanel();
    window.context().setCursor(panel->badCellCursor());
    flush(window);
    const CacheAudit* audit = panel->shownAudit();
    QVERIFY(audit != nullptr && audit->firstBad() != nullptr);
    const RowVerdict& bad = *audit->firstBad();
    QCustomPlot* plot = panel->auditPlot();
    plot->replot();
    const QPointF at(plot->xAxis->coordToPixel(static_cast<double>(bad.row)), plot->yAxis->coordToPixel(static_cast<double>(bad.layer)));
    const QString text = panel->auditCellText(at);
    QVERIFY2(text.contains(QStringLiteral("row %1").arg(bad.row)) && text.contains(Palette::rowStateLabel(bad.state)),
             qPrintable(text));
    QVERIFY2(!text.contains(QLatin1Char('_')), qPrintable(text));
    QCOMPARE(Palette::rowStateLabel(RowState::WrongPosition), QStringLiteral("wrong position"));
    QVERIFY(panel->auditCellText(QPointF(-50, -50)).isEmpty());
  }
};

QTEST_MAIN(LegendsFitTest)
#include "legends_fit_test.moc"
