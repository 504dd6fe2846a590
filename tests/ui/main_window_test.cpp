// The main window end to end on the fixture model pair (llama-tiny target,
// llama-tiny-draft drafter): loading, stepping, the views following the
// cursor, pruned rows, and errors that leave the app working.
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QApplication>
#include <QMessageBox>
#include <QSlider>
#include <QTextBrowser>
#include <QtTest>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/TokenStripWidget.h"
#include "ui/windows/AttentionPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/SessionPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {
constexpr int kTimeout = 120000;

MainWindowOptions fixtureOptions() {
  MainWindowOptions options;
  options.models.target_dir = KVSCOPE_FIXTURES "/models/llama-tiny";
  options.models.drafter_dir = KVSCOPE_FIXTURES "/models/llama-tiny-draft";
  options.restore_layout = false;
  return options;
}

void flush(MainWindow& window) {
  window.timelinePanel()->flushRefresh();
  window.tokenStripPanel()->flushRefresh();
  window.kvCachePanel()->flushRefresh();
  window.attentionPanel()->flushRefresh();
}

// Steps one round and waits until its snapshot arrived.
void stepRound(MainWindow& window) {
  const int64_t before = window.context().latest().round;
  QTRY_VERIFY_WITH_TIMEOUT(window.stepRoundAction()->isEnabled(), kTimeout);
  window.stepRoundAction()->trigger();
  QTRY_VERIFY_WITH_TIMEOUT(window.context().latest().round > before && !window.controller().busy(), kTimeout);
  flush(window);
}

QMessageBox* errorDialog() {
  for (QWidget* widget : QApplication::topLevelWidgets()) {
    if (auto* box = qobject_cast<QMessageBox*>(widget); box && box->objectName() == "errorDialog" && box->isVisible()) {
      return box;
    }
  }
  return nullptr;
}
}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QApplication::setOrganizationName(QStringLiteral("kvscope-tests"));
    QApplication::setApplicationName(QStringLiteral("main_window_test"));
  }

  void opensWithModelsLoaded() {
    MainWindow window(fixtureOptions());
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QCOMPARE(snapshot.target.layers, int64_t{2});
    QCOMPARE(snapshot.drafter.layers, int64_t{1});
    QVERIFY(snapshot.prompt_length > 1);
    // The prefill ran: the cursor sits on round 0 and both caches hold L - 1 entries.
    QCOMPARE(window.context().cursor().round, int64_t{0});
    flush(window);
    QCOMPARE(int64_t{window.kvCachePanel()->targetView()->rowCount()}, snapshot.prompt_length - 1);
    QCOMPARE(int64_t{window.kvCachePanel()->drafterView()->rowCount()}, snapshot.prompt_length - 1);
    QCOMPARE(int64_t{window.tokenStripPanel()->strip()->items().size()}, snapshot.prompt_length);
    QCOMPARE(int(window.docks().size()), 7);
    QVERIFY(window.stepRoundAction()->isEnabled());
  }

  void stepPhaseShowsDraftsThenVerdict() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.stepPhaseAction()->isEnabled(), kTimeout);
    const int64_t prompt = window.context().snapshot()->prompt_length;
    window.stepPhaseAction()->trigger();  // draft
    QTRY_VERIFY_WITH_TIMEOUT(window.context().cursor().phase == Phase::Draft && !window.controller().busy(), kTimeout);
    flush(window);
    const auto& items = window.tokenStripPanel()->strip()->items();
    const int64_t drafts = static_cast<int64_t>(window.context().snapshot()->round(1)->drafts.size());
    QVERIFY(drafts > 0);
    QCOMPARE(int64_t{items.size()}, prompt + drafts);
    QVERIFY(items.back().pending);
    // The drafter cache grew by the drafts it fed; the target has not run yet.
    QCOMPARE(int64_t{window.kvCachePanel()->drafterView()->countStatus(RowStatus::Written)}, drafts);
    QCOMPARE(window.kvCachePanel()->targetView()->countStatus(RowStatus::Written), 0);
    window.stepPhaseAction()->trigger();  // verify
    QTRY_VERIFY_WITH_TIMEOUT(window.context().cursor().phase == Phase::Verify && !window.controller().busy(), kTimeout);
    flush(window);
    QCOMPARE(int64_t{window.attentionPanel()->queryRows()}, drafts + 1);
    QCOMPARE(int64_t{window.kvCachePanel()->targetView()->countStatus(RowStatus::Written)}, drafts + 1);
  }

  void stepRoundUpdatesTimelineTokensAndKv() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    flush(window);
    const int64_t prompt = window.context().snapshot()->prompt_length;
    QCOMPARE(window.timelinePanel()->barCount(), 0);
    const int rows_before = window.kvCachePanel()->targetView()->rowCount();

    stepRound(window);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    const RoundRecord& round = *snapshot.round(1);
    QCOMPARE(window.context().cursor().round, int64_t{1});
    QCOMPARE(window.context().cursor().phase, Phase::Prune);
    QCOMPARE(window.timelinePanel()->barCount(), 1);
    // Committed tokens, plus the struck-through rejected drafts of this round.
    const auto& items = window.tokenStripPanel()->strip()->items();
    const int64_t rejected = static_cast<int64_t>(round.drafts.size()) - round.accepted;
    QCOMPARE(int64_t{items.size()}, prompt + static_cast<int64_t>(round.emitted.size()) + rejected);
    QCOMPARE(int64_t(std::count_if(items.begin(), items.end(), [](const TokenItem& item) { return item.struck; })), rejected);
    // The target cache gained every row the verify wrote (kept or pruned).
    KvHeatmapView* target = window.kvCachePanel()->targetView();
    QCOMPARE(target->rowCount(), rows_before + static_cast<int>(round.drafts.size()) + 1);
    QCOMPARE(window.scrubber()->maximum(), 1);

    // The scrubber moves the cursor back to the prefill; every view follows.
    window.scrubber()->setValue(0);
    flush(window);
    QCOMPARE(window.context().cursor().round, int64_t{0});
    QCOMPARE(target->rowCount(), rows_before);
    QCOMPARE(int64_t{window.tokenStripPanel()->strip()->items().size()}, prompt);
  }

  void prunedRowsAreMarkedInTheirRoundAndGoneInTheNext() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    int64_t rejected_round = -1;
    for (int i = 0; i < 30 && rejected_round < 0; ++i) {
      stepRound(window);
      const RoundRecord* round = window.context().snapshot()->round(window.context().cursor().round);
      QVERIFY(round != nullptr);
      if (round->accepted < static_cast<int64_t>(round->drafts.size())) rejected_round = round->index;
      if (window.context().snapshot()->finished) break;
    }
    QVERIFY2(rejected_round > 0, "no round rejected a draft");
    if (window.context().snapshot()->finished) QSKIP("the session finished on the rejecting round");
    stepRound(window);  // round r + 1 exists

    window.context().goToRound(rejected_round);
    flush(window);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    const RoundRecord& round = *snapshot.round(rejected_round);
    KvHeatmapView* target = window.kvCachePanel()->targetView();
    const int64_t dropped = static_cast<int64_t>(round.drafts.size()) - round.accepted;  // exact bookkeeping
    QCOMPARE(int64_t{target->countStatus(RowStatus::WrittenPruned) + target->countStatus(RowStatus::Pruned)}, dropped);
    std::vector<int64_t> pruned;
    for (int i = 0; i < target->rowCount(); ++i) {
      if (target->matrix().status[i] == RowStatus::WrittenPruned) pruned.push_back(target->matrix().entry_indices[i]);
    }
    QCOMPARE(static_cast<int64_t>(pruned.size()), dropped);
    for (int64_t index : pruned) {
      const LedgerEntry& entry = snapshot.entries[index];
      QCOMPARE(entry.died_round, rejected_round);
      QCOMPARE(entry.reason, DeathReason::RejectedDraft);
      QVERIFY(entry.position >= round.start_length + round.accepted);
    }
    // Clicking a pruned row's entry shows its history.
    window.kvCachePanel()->showEntry(pruned.front());
    QVERIFY(window.kvCachePanel()->history()->toPlainText().contains("rejected"));

    window.context().goToRound(rejected_round + 1);
    flush(window);
    for (int64_t index : target->matrix().entry_indices) {
      QVERIFY(std::find(pruned.begin(), pruned.end(), index) == pruned.end());
    }
    QCOMPARE(target->countStatus(RowStatus::Pruned), 0);
  }

  void badModelDirectoryShowsErrorAndAppKeepsWorking() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    UiModelSpec bad;
    bad.target_dir = "/nonexistent/kvscope-model";
    bad.drafter_dir = KVSCOPE_FIXTURES "/models/llama-tiny-draft";
    window.controller().loadModels(bad);
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    QMessageBox* box = errorDialog();
    QVERIFY(box->informativeText().contains("nonexistent"));
    box->accept();
    QTRY_VERIFY(errorDialog() == nullptr);
    // The loaded models and the session survived: stepping still works.
    stepRound(window);
    QCOMPARE(window.context().cursor().round, int64_t{1});
    QCOMPARE(window.timelinePanel()->barCount(), 1);
  }

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
    QVERIFY(!window.stepRoundAction()->isEnabled());
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

  void diffWithFaultFindsFirstDivergenceAndBadCell() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.sessionPanel()->setFault(QStringLiteral("no-prune"));
    window.diffPanel()->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->diff != nullptr && !window.controller().busy(), kTimeout);
    const DiffData& diff = *window.context().snapshot()->diff;
    QCOMPARE(diff.fault, std::string("no-prune"));
    QVERIFY(diff.diverged);
    QVERIFY(diff.has_bad_cell);
    window.diffPanel()->flushRefresh();
    QVERIFY(window.diffPanel()->pointCount() > 0);
    QVERIFY(window.diffPanel()->summary()->text().contains("first divergence"));
    QVERIFY(window.diffPanel()->goToBadCellButton()->isEnabled());
    window.diffPanel()->goToBadCellButton()->click();
    QCOMPARE(window.context().cursor().round, diff.audit_round);
    QCOMPARE(window.context().cursor().position, diff.bad_position);
    KvHeatmapView* view = diff.audit_cache == CacheRole::Target ? window.kvCachePanel()->targetView()
                                                                : window.kvCachePanel()->drafterView();
    QCOMPARE(int64_t{view->layer()}, diff.bad_layer);
    QCOMPARE(int64_t{view->head()}, diff.bad_head);
  }

  void diffWithoutFaultAgrees() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.diffPanel()->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->diff != nullptr && !window.controller().busy(), kTimeout);
    QVERIFY(!window.context().snapshot()->diff->diverged);
    QCOMPARE(window.context().snapshot()->diff->divergent, int64_t{0});
  }

  void bookmarksJump() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    stepRound(window);
    stepRound(window);
    window.context().goToRound(1);
    window.context().toggleBookmark(1);
    window.context().goToRound(2);
    QCOMPARE(int(window.context().bookmarks().size()), 1);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::keyClick(&window, Qt::Key_1, Qt::ControlModifier);
    QCOMPARE(window.context().cursor().round, int64_t{1});
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
