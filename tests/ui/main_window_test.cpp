// The main window end to end on the fixture model pair (llama-tiny target,
// llama-tiny-draft drafter): loading, stepping, the views following the
// cursor, pruned rows, bookmarks, and errors that leave the app working.
#include <QAction>
#include <QDockWidget>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QTextBrowser>
#include <QLineEdit>
#include <QtTest>

#include <qcustomplot.h>

#include "ui/widgets/KvHeadGrid.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/TokenStripWidget.h"
#include "ui/windows/RowHistoryPanel.h"
#include "ui/windows/SessionPanel.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class MainWindowTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("main_window_test"); }

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
    QCOMPARE(int(window.docks().size()), 11);  // with the Lessons and Compression docks
    QVERIFY(window.stepRoundAction()->isEnabled());
  }

  void opensWithTheDefaultModels() {
    // The bundled pair when resources/models has it, else the fixture pair.
    MainWindowOptions options;
    options.restore_layout = false;
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QVERIFY(snapshot.target.present);
    QVERIFY(snapshot.drafter.present);
    QCOMPARE(window.context().cursor().round, int64_t{0});
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
    // Hovering a draft shows its q, p and the verdict.
    const auto draft = std::find_if(items.begin(), items.end(), [&](const TokenItem& item) {
      return item.position == round.start_length;
    });
    QVERIFY(draft != items.end());
    QVERIFY(draft->tooltip.contains("q(d) = "));
    QVERIFY(draft->tooltip.contains("p(d) = "));
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
    for (const ViewRow& row : target->matrix().rows) {
      if (row.status == RowStatus::WrittenPruned) pruned.push_back(row.entry);
    }
    QCOMPARE(static_cast<int64_t>(pruned.size()), dropped);
    for (int64_t index : pruned) {
      const LedgerEntry& entry = snapshot.entries[index];
      QCOMPARE(entry.died_round, rejected_round);
      QCOMPARE(entry.reason, DeathReason::RejectedDraft);
      QVERIFY(entry.position >= round.start_length + round.accepted);
    }
    // Selecting a pruned row shows its history: written, then removed as a rejected draft.
    window.context().selectEntry(pruned.front());
    window.rowHistoryPanel()->flushRefresh();
    QVERIFY(window.rowHistoryPanel()->text()->toPlainText().contains("rejected"));
    QCOMPARE(window.rowHistoryPanel()->history().events.back().effect, RowEffect::Removed);

    window.context().goToRound(rejected_round + 1);
    flush(window);
    for (const ViewRow& row : target->matrix().rows) {
      QVERIFY(std::find(pruned.begin(), pruned.end(), row.entry) == pruned.end());
    }
    QCOMPARE(target->countStatus(RowStatus::Pruned), 0);
  }

  void badModelDirectoryShowsErrorAndAppKeepsWorking() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    ModelSpec bad;
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

  // The Session panel's Evict field starts a session whose target cache the
  // policy compresses after the prefill: the KV view hatches the masked rows
  // (as many as the cache stopped reading); a spec the core refuses is marked
  // in the field as it is typed, Start shows the core's message, and the
  // running session survives.
  void evictFieldStartsAnEvictingSession() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QCOMPARE(window.kvCachePanel()->targetView()->countMasked(), 0);
    auto* field = window.sessionPanel()->findChild<QLineEdit*>(QStringLiteral("eviction"));
    field->setText(QStringLiteral("streaming:0.5"));
    const auto spec = window.sessionPanel()->sessionSpec();
    QVERIFY(spec.has_value() && spec->options.eviction.has_value());
    QCOMPARE(spec->options.eviction->describe(), std::string("streaming:0.5"));
    QVERIFY(field->property("refusal").toString().isEmpty());
    const auto* before = window.context().snapshot();
    window.sessionPanel()->findChild<QPushButton*>(QStringLiteral("startSession"))->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != before && !window.controller().busy(), kTimeout);
    flush(window);
    const int64_t rows = window.context().snapshot()->prompt_length - 1;
    // Streaming at 50%: the first 4 (sinks) and the most recent rows stay, round(rows / 2) in all.
    QCOMPARE(int64_t{window.kvCachePanel()->targetView()->countMasked()}, rows - (rows + 1) / 2);
    stepRound(window);  // an evicting session steps like any other
    QCOMPARE(window.context().cursor().round, int64_t{1});

    field->setText(QStringLiteral("lru:0.5"));
    QVERIFY2(field->property("refusal").toString().contains(QStringLiteral("lru")),
             qPrintable(field->property("refusal").toString()));
    QString refusal;
    QVERIFY(!window.sessionPanel()->sessionSpec(&refusal).has_value());
    QVERIFY2(refusal.contains(QStringLiteral("lru")), qPrintable(refusal));
    // Refused before anything asks to save the stepped session, or replaces it.
    const auto* stepped = window.context().snapshot();
    window.sessionPanel()->findChild<QPushButton*>(QStringLiteral("startSession"))->click();
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    QCOMPARE(window.context().snapshot(), stepped);
    QVERIFY2(errorDialog()->informativeText().contains(QStringLiteral("lru")), qPrintable(errorDialog()->informativeText()));
    errorDialog()->accept();
    QTRY_VERIFY(errorDialog() == nullptr);
    stepRound(window);
    QCOMPARE(window.context().cursor().round, int64_t{2});
  }

  void smallMultiplesShowEveryKvHead() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    stepRound(window);
    window.kvCachePanel()->targetView()->setAllHeads(true);
    flush(window);
    QCOMPARE(window.kvCachePanel()->targetView()->headGrid()->headCount(), 2);  // llama-tiny: 2 kv heads
    // KVSCOPE_UI_SHOTS=dir saves what the panel looks like (for reviewing the UI).
    if (const QByteArray dir = qgetenv("KVSCOPE_UI_SHOTS"); !dir.isEmpty()) {
      window.resize(1600, 1000);
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      flush(window);
      QTest::qWait(100);
      QVERIFY(window.kvCachePanel()->grab().save(QString::fromUtf8(dir) + "/kv-small-multiples.png"));
    }
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

  void runsToTheEnd() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.runAction()->trigger();  // F5: Run
    QVERIFY(window.controller().running());
    QCOMPARE(window.runAction()->text(), QStringLiteral("Pause"));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->finished && !window.controller().running(), kTimeout);
    flush(window);
    const SessionSnapshot& snapshot = *window.context().snapshot();
    QCOMPARE(int64_t{window.timelinePanel()->barCount()}, snapshot.lastRound());
    QVERIFY(!window.stepRoundAction()->isEnabled());  // nothing left to step
    QCOMPARE(window.runAction()->text(), QStringLiteral("Run"));
  }

  void stopHaltsARunAndSteppingResumes() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    SessionSpec spec = *window.sessionPanel()->sessionSpec();
    spec.options.max_new_tokens = 200;  // ~200 rounds: far more than run before the stop lands
    window.controller().startSession(spec);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->lastRound() == 0 && !window.controller().busy(), kTimeout);
    // The worker checks the flag between phases; the GUI thread never waits.
    window.controller().run();
    window.controller().stop();
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller().running() && !window.controller().busy(), kTimeout);
    QVERIFY(!window.context().snapshot()->finished);
    QVERIFY(window.stepRoundAction()->isEnabled());
    // Stepping resumes where the run stopped (possibly inside a round).
    const Cursor stopped = window.context().latest();
    window.stepRoundAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller().busy() && window.context().latest() != stopped, kTimeout);
    QCOMPARE(window.context().latest().phase, Phase::Prune);
  }

  void selectingATokenShowsItsCacheEntry() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    stepRound(window);
    const TokenStripWidget* strip = window.tokenStripPanel()->strip();
    QVERIFY(strip->items().size() > 3);
    emit window.tokenStripPanel()->strip()->positionClicked(2);
    QCOMPARE(window.context().cursor().position, int64_t{2});
    flush(window);
    window.rowHistoryPanel()->flushRefresh();
    QVERIFY(window.rowHistoryPanel()->text()->toPlainText().contains("written for position 2"));
    QVERIFY(window.rowHistoryPanel()->text()->toPlainText().contains("born round 0 prefill"));
  }

  void layoutIsSavedRestoredAndReset() {
    {
      MainWindowOptions options = fixtureOptions();
      options.load_on_start = false;
      MainWindow window(options);
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      window.docks().at(4)->hide();  // the attention panel
      window.close();                // saves the layout
    }
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    options.restore_layout = true;
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QVERIFY(window.docks().at(4)->isHidden());
    window.docks().at(4)->toggleViewAction()->trigger();  // View menu: reopen
    QVERIFY(!window.docks().at(4)->isHidden());
    window.docks().at(2)->hide();
    window.resetLayout();
    for (QDockWidget* dock : window.docks()) {
      if (dock->objectName() == "sessionDock" || dock->objectName() == "timelineDock" || dock->objectName() == "kvDock") {
        QVERIFY2(!dock->isHidden(), qPrintable(dock->objectName()));
      }
    }
  }

  void clickingTheTimelineAndAKvRowMovesTheCursor() {
    MainWindow window(fixtureOptions());
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    stepRound(window);
    stepRound(window);
    QCustomPlot* timeline = window.timelinePanel()->plot();
    timeline->replot();
    const QPoint bar(static_cast<int>(timeline->xAxis->coordToPixel(1)), static_cast<int>(timeline->yAxis->coordToPixel(0.5)));
    QTest::mouseClick(timeline, Qt::LeftButton, {}, bar);
    QCOMPARE(window.context().cursor().round, int64_t{1});
    flush(window);
    KvHeatmapView* target = window.kvCachePanel()->targetView();
    target->plot()->replot();
    const int row = 3;
    const QPoint cell(static_cast<int>(target->plot()->xAxis->coordToPixel(4)),
                      static_cast<int>(target->plot()->yAxis->coordToPixel(row)));
    QTest::mouseClick(target->plot(), Qt::LeftButton, {}, cell);
    const LedgerEntry& entry = window.context().snapshot()->entries[target->matrix().rows[row].entry];
    QCOMPARE(window.context().cursor().position, entry.position);
    QCOMPARE(window.context().cursor().entry, target->matrix().rows[row].entry);
    QCOMPARE(window.context().cursor().row, int64_t{row});
    window.rowHistoryPanel()->flushRefresh();
    QVERIFY(window.rowHistoryPanel()->text()->toPlainText().contains(QStringLiteral("written for position %1").arg(entry.position)));
  }

  void ngramDrafterHasNoDrafterCache() {
    MainWindowOptions options = fixtureOptions();
    options.models.drafter_kind = DrafterKind::Ngram;
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr, kTimeout);
    QVERIFY(!window.context().snapshot()->drafter.present);
    QVERIFY(QString::fromStdString(window.context().snapshot()->drafter_name).contains("prompt-lookup"));
    stepRound(window);
    QCOMPARE(window.kvCachePanel()->drafterView()->rowCount(), 0);
    QVERIFY(window.kvCachePanel()->targetView()->rowCount() > 0);
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
