// Workspaces for each job, on a 1280x720 projector screen
// (offscreen, configured in main): at 1024x768 and 1280x720, at 100% and
// 150%, every lesson page opened in Teach gives the panel it outlines at
// least 45% of the window, scrolls the step it names into the visible part
// of that panel (a KV Cache page: brings the tab it names to the front) and shows Verify Attention's query labels without overlap;
// zooming to 200% and back puts every dock of every workspace back within 5%;
// each workspace keeps its arrangement per window size; the window's minimum
// size and a restored geometry fit the screen. And what is shown is said:
// `kvscope FILE.kvtrace` opens that trace; the audit grid is captioned with
// the cursor's moment after every navigation; a refused slot shows no stale
// result; lesson 1 page 4's numbers are the KV views' row counts.
#include <QDir>
#include <QDockWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include <qcustomplot.h>

#include <cstdlib>

#include "tests/ui/ui_test_support.h"
#include "ui/lessons/Lesson.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/widgets/CompressionSettingsForm.h"
#include "ui/widgets/CompressionSlotView.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/RoundDraftsTable.h"
#include "ui/widgets/SelfSpeculationView.h"
#include "ui/windows/AttentionStepsPanel.h"
#include "ui/windows/LessonPanel.h"
#include "ui/windows/WindowFit.h"
#include "ui/windows/Workspaces.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

constexpr QSize kScreen(1280, 720);  // the offscreen screen main() configures

void settle(MainWindow& window, int ms = 60) {
  QTest::qWait(ms);
  flush(window);
  window.lessonPanel()->flushRefresh();
}

QMap<QString, QSize> visibleDockSizes(MainWindow& window) {
  QMap<QString, QSize> sizes;
  for (QDockWidget* dock : window.docks()) {
    if (dock->isVisible() && !dock->visibleRegion().isEmpty()) sizes[dock->objectName()] = dock->size();
  }
  return sizes;
}

QMap<QString, QSize> settledDockSizes(MainWindow& window) {
  return settledSizes([&] { settle(window); }, [&] { return visibleDockSizes(window); }, 50);
}

bool within(const QSize& a, const QSize& b, double fraction) {
  return std::abs(a.width() - b.width()) <= fraction * b.width() + 1 &&
         std::abs(a.height() - b.height()) <= fraction * b.height() + 1;
}

void waitForPage(MainWindow& window) {
  QTRY_VERIFY_WITH_TIMEOUT(window.lessonRunner()->ready() && !window.controller().busy(), kTimeout);
  settle(window, 150);
}

QString where(const Lesson& lesson, int page, const QSize& size, int zoom) {
  return QStringLiteral("%1 page %2 at %3x%4 %5%").arg(lesson.title).arg(page + 1).arg(size.width()).arg(size.height()).arg(zoom);
}

// The outlined panel: in front, at least 45% of the window, its step in view.
void checkOutlinedPanel(MainWindow& window, const LessonPage& page, const QString& at) {
  QDockWidget* dock = window.dock(dockNameOfPanel(page.panel));
  QVERIFY2(dock && dock->isVisible() && !dock->visibleRegion().isEmpty(), qPrintable(at + ": not in front"));
  const double area = double(dock->widget()->width()) * dock->widget()->height();
  const double share = area / (double(window.width()) * window.height());
  QVERIFY2(share >= 0.45, qPrintable(QStringLiteral("%1: %2 has %3% of the window (%4x%5)")
                                         .arg(at, dock->objectName())
                                         .arg(share * 100, 0, 'f', 1)
                                         .arg(dock->widget()->width())
                                         .arg(dock->widget()->height())));
  // The KV Cache's steps are its tabs: the one named is in front.
  if (page.panel == QStringLiteral("kv") && !page.step.isEmpty()) {
    QCOMPARE(window.kvCachePanel()->showingPoolTab(), page.step == QStringLiteral("pool"));
    return;
  }
  if (!page.step.isEmpty()) {
    AttentionStepsPanel* steps = window.attentionStepsPanel();
    QWidget* step = steps->stepWidget(page.step);
    QVERIFY2(step != nullptr, qPrintable(at + ": no step " + page.step));
    QWidget* viewport = steps->scrollArea()->viewport();
    const auto rectOf = [&] { return QRect(step->mapTo(viewport, QPoint(0, 0)), step->size()); };
    const auto inView = [&] {
      const QRect r = rectOf();
      return r.top() >= -1 && (r & viewport->rect()).height() >= std::min(r.height(), viewport->height()) - 2;
    };
    QTest::qWaitFor(inView, 2000);  // the last cards settling after the page is ready
    const QRect rect = rectOf();
    const QRect seen = rect & viewport->rect();
    QVERIFY2(inView(),
             qPrintable(QStringLiteral("%1: step %2 at y %3 (%4 px tall), %5 px of it seen in a %6 px view")
                            .arg(at, page.step)
                            .arg(rect.top())
                            .arg(rect.height())
                            .arg(seen.height())
                            .arg(viewport->height())));
  }
}

// Verify Attention's row labels as drawn: no two rectangles meet.
void checkQueryLabels(MainWindow& window, const QString& at) {
  // Drawn now, twice: a layout that changed the rows' height re-thins them for the next replot.
  for (int i = 0; i < 2; ++i) window.attentionPanel()->plot()->replot(QCustomPlot::rpImmediateRefresh);
  const QList<QRect> rects = window.attentionPanel()->queryLabelRects();
  QVERIFY2(!rects.isEmpty() || window.attentionPanel()->queryRows() == 0, qPrintable(at + ": no query labels"));
  for (int i = 0; i < rects.size(); ++i) {
    for (int j = i + 1; j < rects.size(); ++j) {
      QVERIFY2(!rects[i].intersects(rects[j]), qPrintable(QStringLiteral("%1: query labels %2 and %3 overlap (y %4 and %5)")
                                                              .arg(at)
                                                              .arg(i)
                                                              .arg(j)
                                                              .arg(rects[i].top())
                                                              .arg(rects[j].top())));
    }
  }
}

// The fixture pair in a window of `size` at `zoom` percent (0: the remembered zoom), stepped `rounds` rounds.
MainWindowOptions sizedOptions(QSize size, int zoom, int rounds = 0) {
  MainWindowOptions options = fixtureOptions();
  options.size = size;
  if (zoom > 0) options.presenter_zoom = zoom;
  options.initial_rounds = rounds;
  return options;
}

// Shows the window and waits until its session is there and the engine idle.
void showReady(MainWindow& window) {
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
}

// The key axis's title is centred under the heatmap: it must stay on the plot on both sides.
void checkKeyAxisTitle(MainWindow& window, const QString& at) {
  QCustomPlot* plot = window.attentionPanel()->plot();
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QTest::qWait(20);
  const int centre = plot->axisRect()->rect().center().x();
  const int width = QFontMetrics(plot->xAxis->labelFont()).horizontalAdvance(plot->xAxis->label());
  QVERIFY2(centre - width / 2 >= 0 && centre + (width + 1) / 2 <= plot->width(),
           qPrintable(QStringLiteral("%1: key axis title '%2' (%3 px) cut: centre %4 of %5 px")
                          .arg(at, plot->xAxis->label())
                          .arg(width)
                          .arg(centre)
                          .arg(plot->width())));
}

// A Tokens page's stage: the cursor round's drafts in a table under the strip, whole, with the round's own numbers.
void checkDraftsTable(MainWindow& window, const QString& at) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  const RoundRecord* round = snapshot ? snapshot->round(window.context().cursor().round) : nullptr;
  if (!round || round->drafts.empty()) return;
  RoundDraftsTable* table = window.tokenStripPanel()->draftsTable();
  QVERIFY2(table->isVisible(), qPrintable(at + ": the drafts table is not shown on the Tokens stage"));
  QCOMPARE(table->rowCount(), static_cast<int>(round->drafts.size()));
  QVERIFY2(table->height() >= table->heightForWidth(table->width()) - 1,
           qPrintable(QStringLiteral("%1: drafts table %2 px tall, its rows need %3").arg(at).arg(table->height()).arg(table->heightForWidth(table->width()))));
  for (size_t i = 0; i < round->drafts.size() && i < round->q_draft.size(); ++i) {
    QCOMPARE(table->cellText(static_cast<int>(i), 2), QString::number(round->q_draft[i], 'f', 3));
  }
}

}  // namespace

class WorkspacesTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    useTestSettings("workspaces_test");
    QSettings().clear();
    QCOMPARE(QGuiApplication::primaryScreen()->geometry().size(), kScreen);
  }

  void everyLessonPageGivesItsPanelTheRoom_data() {
    QTest::addColumn<QSize>("size");
    QTest::addColumn<int>("zoom");
    for (const QSize size : {QSize(1024, 768), QSize(1280, 720)}) {
      for (const int zoom : {100, 150}) {
        QTest::newRow(qPrintable(QStringLiteral("%1x%2@%3").arg(size.width()).arg(size.height()).arg(zoom))) << size << zoom;
      }
    }
  }

  void everyLessonPageGivesItsPanelTheRoom() {
    QFETCH(QSize, size);
    QFETCH(int, zoom);
    MainWindow window(sizedOptions(size, zoom));
    showReady(window);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(window.size(), size);
    const QVector<Lesson> lessons = window.lessonPanel()->lessons();
    QVERIFY(lessons.size() >= 6);
    for (int l = 0; l < lessons.size(); ++l) {
      for (int p = 0; p < lessons[l].pages.size(); ++p) {
        // Each page opened directly, as --lesson N --lesson-page P does.
        window.openLesson(l, p);
        waitForPage(window);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(window.workspaces()->current(), Workspace::Teach);
        const LessonPage& page = lessons[l].pages[p];
        const QString at = where(lessons[l], p, size, zoom);
        checkOutlinedPanel(window, page, at);
        if (QTest::currentTestFailed()) return;
        if (page.panel == QStringLiteral("attention")) checkQueryLabels(window, at);
        if (page.panel == QStringLiteral("attention")) checkKeyAxisTitle(window, at);
        if (page.panel == QStringLiteral("tokens")) checkDraftsTable(window, at);
        if (QTest::currentTestFailed()) return;
        // The page's state is on screen with its text: the "what if" it talks about was recomputed.
        if (!page.what_if_remove.isEmpty()) QVERIFY2(window.attentionStepsPanel()->whatIf() != nullptr, qPrintable(at));
        QVERIFY2(!window.lessonPanel()->pageText().contains(QStringLiteral("Setting up")), qPrintable(at));
      }
    }
    QCOMPARE(window.size(), size);
  }

  void verifyAttentionLabelsNeverOverlapInTheDebugLayout_data() { everyLessonPageGivesItsPanelTheRoom_data(); }

  void verifyAttentionLabelsNeverOverlapInTheDebugLayout() {
    // The Debug workspace gives Verify Attention its smallest share: the labels thin out instead of piling up.
    QFETCH(QSize, size);
    QFETCH(int, zoom);
    MainWindowOptions options = fixtureOptions();
    options.size = size;
    options.presenter_zoom = zoom;
    options.initial_rounds = 1;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->lastRound() >= 1 &&
                                 !window.controller().busy(),
                             kTimeout);
    window.dock(QStringLiteral("attentionDock"))->raise();
    settledDockSizes(window);
    QVERIFY(window.attentionPanel()->queryRows() > 0);
    checkQueryLabels(window, QStringLiteral("debug %1x%2 %3%").arg(size.width()).arg(size.height()).arg(zoom));
  }

  void aPickedRowBringsTheRowHistoryForwardOnANarrowScreen() {
    // 1024 wide: the Row History is a tab of the left column, behind the Round Timeline; a row
    // clicked in the KV view brings it forward. The Debug Tokens dock is too short for the drafts table.
    MainWindow window(sizedOptions(QSize(1024, 768), 0, 1));
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->lastRound() >= 1 &&
                                 !window.controller().busy(),
                             kTimeout);
    QCOMPARE(window.workspaces()->current(), Workspace::Debug);
    settledDockSizes(window);
    QDockWidget* history = window.dock(QStringLiteral("rowHistoryDock"));
    QVERIFY(!window.tabifiedDockWidgets(history).isEmpty());
    window.dock(QStringLiteral("timelineDock"))->raise();
    QTRY_VERIFY(history->visibleRegion().isEmpty());
    QVERIFY(!window.tokenStripPanel()->draftsTable()->isVisible());
    window.context().selectEntry(0);
    QTRY_VERIFY2(!history->visibleRegion().isEmpty(), "the picked row's history stayed behind the Round Timeline");
    // A closed Row History stays closed.
    history->close();
    window.context().selectEntry(1);
    QTest::qWait(50);
    QVERIFY(history->isHidden());
  }

  void theWhatIfControlsAreNeverCut_data() {
    QTest::addColumn<QSize>("size");
    QTest::addColumn<int>("zoom");
    QTest::addColumn<bool>("stacked");
    QTest::newRow("1024x768@200") << QSize(1024, 768) << 200 << true;
    QTest::newRow("1280x720@100") << QSize(1280, 720) << 100 << false;
  }

  void theWhatIfControlsAreNeverCut() {
    // Lesson 6's what-if page: at 200% on a projector the controls stack one per row
    // (side by side they cut Recompute to "Reco"); at a laptop's 100% they stay side by side.
    QFETCH(QSize, size);
    QFETCH(int, zoom);
    QFETCH(bool, stacked);
    MainWindow window(sizedOptions(size, zoom));
    showReady(window);
    if (QTest::currentTestFailed()) return;
    const QVector<Lesson> lessons = window.lessonPanel()->lessons();
    int lesson = -1, page = -1;
    for (int l = 0; l < lessons.size() && page < 0; ++l) {
      for (int p = 0; p < lessons[l].pages.size(); ++p) {
        if (!lessons[l].pages[p].what_if_remove.isEmpty()) {
          lesson = l;
          page = p;
          break;
        }
      }
    }
    QVERIFY2(page >= 0, "no lesson page recomputes a what-if");
    window.openLesson(lesson, page);
    waitForPage(window);
    if (QTest::currentTestFailed()) return;
    AttentionStepsPanel* steps = window.attentionStepsPanel();
    QTRY_COMPARE(steps->whatIfControlsStacked(), stacked);
    auto* recompute = steps->findChild<QPushButton*>(QStringLiteral("stepsRecompute"));
    QVERIFY(recompute != nullptr);
    const QRect button(recompute->mapTo(steps, QPoint(0, 0)), recompute->size());
    QVERIFY2(button.right() <= steps->width() && recompute->width() >= recompute->sizeHint().width(),
             qPrintable(QStringLiteral("Recompute at x %1..%2 (%3 px of %4 wanted) in a panel %5 px wide")
                            .arg(button.left())
                            .arg(button.right())
                            .arg(recompute->width())
                            .arg(recompute->sizeHint().width())
                            .arg(steps->width())));
  }

  void zoomingBackRestoresEveryWorkspace_data() {
    QTest::addColumn<QSize>("size");
    QTest::newRow("1024x768") << QSize(1024, 768);
    QTest::newRow("1280x720") << QSize(1280, 720);
  }

  void zoomingBackRestoresEveryWorkspace() {
    QFETCH(QSize, size);
    MainWindowOptions options = fixtureOptions();
    options.size = size;
    options.presenter_zoom = 100;
    options.run_diff = true;
    options.session.options.fault = Fault::PruneShort;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->diff && !window.controller().busy(),
                             kTimeout);
    for (Workspace workspace : Workspaces::all()) {
      window.workspaces()->switchTo(workspace);
      const QMap<QString, QSize> before = settledDockSizes(window);
      QVERIFY(!before.isEmpty());
      window.setPresenterZoom(200);
      const QMap<QString, QSize> zoomed = settledDockSizes(window);
      window.setPresenterZoom(100);
      const QMap<QString, QSize> after = settledDockSizes(window);
      QCOMPARE(window.size(), size);
      for (auto it = before.begin(); it != before.end(); ++it) {
        QVERIFY2(after.contains(it.key()), qPrintable(Workspaces::name(workspace) + ": " + it.key() + " gone"));
        QVERIFY2(within(after.value(it.key()), *it, 0.05),
                 qPrintable(QStringLiteral("%1: %2 %3x%4 before, %5x%6 at 200%, %7x%8 back at 100%")
                                .arg(Workspaces::name(workspace), it.key())
                                .arg(it->width()).arg(it->height())
                                .arg(zoomed.value(it.key()).width()).arg(zoomed.value(it.key()).height())
                                .arg(after.value(it.key()).width()).arg(after.value(it.key()).height())));
      }
    }
  }

  void eachWorkspaceKeepsItsArrangementPerWindowSize() {
    MainWindowOptions options = fixtureOptions();
    options.size = QSize(1280, 720);
    options.load_on_start = false;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    Workspaces* workspaces = window.workspaces();
    QCOMPARE(workspaces->current(), Workspace::Debug);
    // The View menu's and the bar's actions switch; each workspace's job panel is large.
    workspaces->action(Workspace::Compress)->trigger();
    QCOMPARE(workspaces->current(), Workspace::Compress);
    QVERIFY(workspaces->action(Workspace::Compress)->isChecked());
    settledDockSizes(window);
    QDockWidget* compression = window.dock(QStringLiteral("compressionDock"));
    QVERIFY2(compression->width() * compression->height() >= 0.45 * window.width() * window.height(),
             qPrintable(QStringLiteral("compression %1x%2").arg(compression->width()).arg(compression->height())));
    workspaces->switchTo(Workspace::Capture);
    const QMap<QString, QSize> capture = settledDockSizes(window);
    // The diff (report, root cause, audit) is the largest panel on screen.
    const auto area = [](const QSize& size) { return size.width() * size.height(); };
    for (auto it = capture.begin(); it != capture.end(); ++it) {
      QVERIFY2(area(*it) <= area(capture.value(QStringLiteral("diffDock"))),
               qPrintable(QStringLiteral("%1 %2x%3 is larger than the diff").arg(it.key()).arg(it->width()).arg(it->height())));
    }
    // Teach, rearranged by hand: switching away and back keeps the hand's arrangement.
    workspaces->switchTo(Workspace::Teach);
    QMap<QString, QSize> teach = settledDockSizes(window);
    QDockWidget* lessons = window.dock(QStringLiteral("lessonsDock"));
    window.resizeDocks({lessons}, {lessons->width() + 120}, Qt::Horizontal);
    teach = settledDockSizes(window);
    workspaces->switchTo(Workspace::Debug);
    settledDockSizes(window);
    QVERIFY(lessons->visibleRegion().isEmpty() || lessons->width() != teach.value(QStringLiteral("lessonsDock")).width());
    workspaces->switchTo(Workspace::Teach);
    QMap<QString, QSize> back = settledDockSizes(window);
    for (auto it = teach.begin(); it != teach.end(); ++it) {
      QVERIFY2(within(back.value(it.key()), *it, 0.02), qPrintable(it.key()));
    }
    // Another window size (resized in Debug): Teach's own default there; back at
    // 1280x720, the hand's arrangement again.
    workspaces->switchTo(Workspace::Debug);
    window.resize(1024, 768);
    settledDockSizes(window);
    workspaces->switchTo(Workspace::Teach);
    settledDockSizes(window);
    QVERIFY2(std::abs(lessons->width() - 1024 * 30 / 100) < 40, qPrintable(QStringLiteral("lessons %1 wide at 1024").arg(lessons->width())));
    workspaces->switchTo(Workspace::Debug);
    window.resize(1280, 720);
    settledDockSizes(window);
    workspaces->switchTo(Workspace::Teach);
    back = settledDockSizes(window);
    QVERIFY2(within(back.value(QStringLiteral("lessonsDock")), teach.value(QStringLiteral("lessonsDock")), 0.02),
             qPrintable(QStringLiteral("lessons %1 wide, %2 before").arg(back.value("lessonsDock").width())
                            .arg(teach.value("lessonsDock").width())));
  }

  void theWindowFitsTheScreen() {
    // The minimum: 1024x720 (a 1280x720 projector's whole screen fits), bounded by a smaller screen.
    QCOMPARE(minimumWindowSize(QSize(1920, 1080)), QSize(1024, 720));
    QCOMPARE(minimumWindowSize(QSize(800, 600)), QSize(800, 600));
    QCOMPARE(clampToScreen(QRect(600, 400, 1600, 1000), QRect(0, 0, 1280, 720)), QRect(0, 0, 1280, 720));
    // Moved inside, and never below the minimum.
    QCOMPARE(clampToScreen(QRect(500, 100, 1100, 700), QRect(0, 0, 1280, 720)), QRect(180, 0, 1100, 720));
    QCOMPARE(clampToScreen(QRect(-50, 10, 600, 500), QRect(0, 0, 1920, 1080)), QRect(0, 10, 1024, 720));
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    {
      MainWindow window(options);
      QCOMPARE(window.minimumSize(), QSize(1024, 720));
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      window.resize(800, 600);  // refused: not below the minimum
      QTest::qWait(50);
      QVERIFY(window.width() >= 1024 && window.height() >= 720);
      // Saved on a larger screen: 1600x1000 at (600, 400).
      window.setGeometry(600, 400, 1600, 1000);
      QTest::qWait(50);
      QSettings().setValue(QStringLiteral("window/geometry"), window.saveGeometry());
    }
    options.restore_layout = true;
    MainWindow restored(options);
    const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
    QVERIFY2(screen.contains(restored.geometry()),
             qPrintable(QStringLiteral("restored at %1,%2 %3x%4").arg(restored.x()).arg(restored.y())
                            .arg(restored.width()).arg(restored.height())));
  }

  void theCommandLinesFileIsOpened() {
    // `kvscope FILE.kvtrace` puts the file in MainWindowOptions::open_file.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("two-rounds.kvtrace"));
    int64_t rounds = 0;
    {
      MainWindowOptions options = fixtureOptions();
      options.initial_rounds = 2;
      options.session.options.fault = Fault::PruneShort;
      MainWindow window(options);
      QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->lastRound() >= 2 &&
                                   !window.controller().busy(),
                               kTimeout);
      rounds = window.context().snapshot()->lastRound();
      QSignalSpy saved(&window.controller(), &EngineController::traceSaved);
      window.saveTrace(path);
      QTRY_VERIFY_WITH_TIMEOUT(saved.count() == 1, kTimeout);
    }
    MainWindowOptions options = fixtureOptions();
    options.open_file = path;
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->replay_only &&
                                 !window.controller().busy(),
                             kTimeout);
    QCOMPARE(window.context().snapshot()->lastRound(), rounds);
    QCOMPARE(window.context().snapshot()->fault, std::string("prune-short"));
    QVERIFY(window.windowTitle().contains(path));
    // A file that is no trace is refused with its name, before anything is replaced.
    const QString junk = dir.filePath(QStringLiteral("junk.kvtrace"));
    QFile file(junk);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("this is not a safetensors file");
    file.close();
    const SessionSnapshot* before = window.context().snapshot();
    window.openFile(junk);
    QTRY_VERIFY(errorDialog() != nullptr);
    QVERIFY2(errorDialog()->informativeText().contains(junk), qPrintable(errorDialog()->informativeText()));
    errorDialog()->accept();
    QCOMPARE(window.context().snapshot(), before);
  }

  void theAuditCaptionIsTheCursorsMoment() {
    MainWindowOptions options = fixtureOptions();
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    runDiff(window, "prune-short");
    if (QTest::currentTestFailed()) return;
    window.dock(QStringLiteral("diffDock"))->raise();
    DiffPanel* diff = window.diffPanel();
    const auto expected = [&] {
      const Cursor& c = window.context().cursor();
      return QStringLiteral("Audit of the %1 cache after round %2 %3")
          .arg(QString::fromUtf8(cacheRoleName(c.cache)))
          .arg(c.round)
          .arg(QString::fromUtf8(phaseName(c.phase)));
    };
    const auto check = [&](const char* navigation) {
      QTRY_VERIFY2_WITH_TIMEOUT(diff->auditCaption() == expected() && !window.controller().busy(),
                                qPrintable(QStringLiteral("after %1: caption '%2', cursor %3")
                                               .arg(QString::fromUtf8(navigation), diff->auditCaption(), expected())),
                                kTimeout);
      const CacheAudit* audit = diff->shownAudit();
      QVERIFY2(audit != nullptr, navigation);
      QCOMPARE(audit->moment.round, window.context().cursor().round);
      QCOMPARE(audit->moment.phase, window.context().cursor().phase);
    };
    check("the diff");
    diff->goToRootCauseButton()->click();
    check("Go to root cause");
    window.stepBackAction()->trigger();
    check("Step Back Phase");
    window.stepPhaseAction()->trigger();
    check("Step Phase (history)");
    window.context().goToRound(1);
    check("round 1");
    window.stepRoundAction()->trigger();
    check("Step Round (history)");
    Cursor drafter = window.context().cursor();
    drafter.cache = CacheRole::Drafter;
    window.context().setCursor(drafter);
    check("the drafter's cache");
    window.context().setCursor(window.context().latest());
    check("Latest");
    diff->goToBadCellButton()->click();
    check("Go to first bad cell");
  }

  void aRefusedSlotShowsNoStaleResult() {
    MainWindowOptions options = fixtureOptions();
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    CompressionPanel* panel = window.compressionPanel();
    const auto runNow = [&] {
      const CompressionRunPtr before = panel->lastRun();
      panel->runButton()->click();
      const bool done = QTest::qWaitFor([&] { return panel->lastRun() != before && !panel->pending(); }, kTimeout);
      flush(window);
      return done;
    };
    panel->speculationGammaBox()->setValue(2);
    QVERIFY(panel->form(0)->applyShorthand(QStringLiteral("h2o:0.25"), nullptr));
    QVERIFY(panel->form(1)->applyShorthand(QStringLiteral("snapkv:0.5"), nullptr));
    panel->form(1)->setKernel(5);
    QVERIFY(runNow());
    const auto drafted = [&](int slot) {
      SelfSpeculationView* view = panel->speculationView(slot);
      return view->shownOutcomes(DraftOutcome::Accepted) + view->shownOutcomes(DraftOutcome::Correction) +
             view->shownOutcomes(DraftOutcome::Bonus);
    };
    QVERIFY(drafted(1) > 0);
    QVERIFY(!panel->slotView(1)->shownRemovedRows().empty());
    QTableWidget* table = panel->summaryTable();
    QVERIFY(table->item(0, 1)->text() != QStringLiteral("\u2013"));
    // B refused: nothing of its last run stays on screen as if it were current.
    panel->form(1)->setKernel(4);
    QVERIFY(runNow());
    QVERIFY(panel->statusText().contains(QStringLiteral("--kernel must be odd")));
    QVERIFY2(panel->speculationView(1)->caption().contains(QStringLiteral("--kernel must be odd")),
             qPrintable(panel->speculationView(1)->caption()));
    QCOMPARE(drafted(1), int64_t{0});
    QVERIFY(panel->slotView(1)->shownRemovedRows().empty());
    for (int r = 0; r < table->rowCount(); ++r) QCOMPARE(table->item(r, 1)->text(), QStringLiteral("\u2013"));
    QVERIFY(drafted(0) > 0);  // A ran
  }

  void lessonOnePageFourCountsTheRowsThePanelsShow() {
    MainWindowOptions options;  // the bundled pair (else the fixture pair), as the lesson is given
    options.restore_layout = false;
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.openLesson(0, 3);
    waitForPage(window);
    const QString text = window.lessonPanel()->pageText();
    const auto held = [](KvHeatmapView* view) {
      return view->countStatus(RowStatus::Kept) + view->countStatus(RowStatus::Written);
    };
    const int target = held(window.kvCachePanel()->targetView());
    const int drafter = held(window.kvCachePanel()->drafterView());
    QVERIFY(target > 0 && drafter > 0);
    QVERIFY2(text.contains(QStringLiteral("the target cache holds %1 rows").arg(target)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("The drafter cache holds %1").arg(drafter)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("the sequence has %1 tokens").arg(target + 1)), qPrintable(text));
    // Bound to the page's moment: stepping on does not rewrite it.
    stepRound(window);
    settle(window);
    QCOMPARE(window.lessonPanel()->pageText(), text);
  }
};

int main(int argc, char** argv) {
  // One 1280x720 screen, as a projector gives: the window's minimum and the
  // restored geometry are measured against it.
  QTemporaryDir dir;
  const QString config = dir.filePath(QStringLiteral("screens.json"));
  QFile file(config);
  if (!file.open(QIODevice::WriteOnly)) return 1;
  file.write(R"({"screens": [{"name": "projector", "x": 0, "y": 0, "width": 1280, "height": 720,
                 "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]})");
  file.close();
  qputenv("QT_QPA_PLATFORM", QByteArray("offscreen:configfile=") + config.toUtf8());
  QApplication app(argc, argv);
  WorkspacesTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "workspaces_test.moc"
