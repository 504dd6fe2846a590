// The KV Cache panel's Paged pool tab (ui/widgets/PagedPoolView): on a live
// batch of three with paged:4, every pool block is painted in its owner
// sequence's colour and free blocks grey, the shown sequence's block table
// is the strip and follows the Batch picker, a hover names owner, positions
// and the last log entry; an entry freed while still mapped (made with
// BlockTable::setFreeMappedOnRollback on a core-built batch) is marked in the
// strip and the grid; the legend fits at 1024x768 and 1280x720 at 100% and
// 150%; a contiguous session shows how to get a pool. Row History names a
// paged row's block and offset. Lesson 7's numbers come from the session.
// The tab follows the cursor: at each moment it draws what core replays for
// it, names the moment in its header, and at a freed-block-reused diff's
// root cause draws the freed block dangling (not one phase earlier).
#include <QComboBox>
#include <QDockWidget>
#include <set>
#include <QTextBrowser>
#include <QTextDocument>
#include <QtTest>

#include "core/cache/block_table.h"
#include "core/decode/batch_session.h"
#include "core/decode/drafter.h"
#include "core/model/causal_lm.h"
#include "tests/ui/ui_test_support.h"
#include "ui/lessons/Lesson.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/lessons/LessonText.h"
#include "ui/widgets/BlockTableStrip.h"
#include "ui/widgets/PagedPoolView.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PoolBlockGrid.h"
#include "ui/widgets/WrappedLegend.h"
#include "ui/windows/LessonPanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const QStringList kPrompts{QStringLiteral("And the LORD spake unto Moses, saying,"), QStringLiteral("In the beginning God created"),
                           QStringLiteral("And it came to pass")};

// Starts a batch of kPrompts with `layout` from the Session panel, as a user does, and steps `rounds` rounds.
void startBatch(MainWindow& window, const QString& layout, int rounds) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
  SessionPanel* session = window.sessionPanel();
  session->setPrompt(kPrompts.join(QLatin1Char('\n')));
  session->setBatchLines(true);
  auto* box = session->findChild<QComboBox*>(QStringLiteral("cacheLayout"));
  QVERIFY(box != nullptr);
  box->setCurrentText(layout);
  QString error;
  const auto spec = session->sessionSpec(&error);
  QVERIFY2(spec.has_value(), qPrintable(error));
  QCOMPARE(spec->more_prompts.size(), size_t{2});
  const SnapshotPtr before = window.context().snapshotPtr();
  const DiscardUnsaved discard;
  window.controller().startSession(*spec);
  waitForSnapshot(window, before);
  for (int r = 0; r < rounds && !QTest::currentTestFailed(); ++r) stepRound(window);
}

PagedPoolView* showPool(MainWindow& window) {
  window.dock(Panel::Kv)->show();
  window.dock(Panel::Kv)->raise();
  window.kvCachePanel()->showPoolTab(true);
  QApplication::processEvents();
  flush(window);
  return window.kvCachePanel()->poolView();
}

// The colour a cell is filled with, left of its centred number and inside any frame.
QColor cellFill(QWidget* widget, const QRect& cell) {
  const QImage image = widget->grab().toImage();
  return image.pixelColor(cell.left() + 6, cell.center().y());
}

// As legends_fit_test: every line fits the label's width and the label is as tall as its lines.
void fits(QLabel* label, const QString& where) {
  QVERIFY2(label != nullptr, qPrintable(where));
  QTextDocument document;
  document.setDefaultFont(label->font());
  document.setDocumentMargin(0);
  document.setHtml(label->text());
  document.setTextWidth(label->wordWrap() ? label->contentsRect().width() : -1);
  QVERIFY2(document.idealWidth() <= label->contentsRect().width() + 1,
           qPrintable(QStringLiteral("%1: a line of %2 px in %3 px").arg(where).arg(document.idealWidth()).arg(label->contentsRect().width())));
  QVERIFY2(label->height() + 1 >= label->heightForWidth(label->width()),
           qPrintable(QStringLiteral("%1: %2 px tall, its lines need %3").arg(where).arg(label->height()).arg(label->heightForWidth(label->width()))));
  QVERIFY2(label->height() >= QFontMetrics(label->font()).height(), qPrintable(where + ": no line shown"));
}

int lessonIndex(MainWindow& window, const QString& file) {
  for (int l = 0; l < window.lessonPanel()->lessons().size(); ++l) {
    if (window.lessonPanel()->lessons()[l].file.endsWith(file)) return l;
  }
  return -1;
}

}  // namespace

class PagedPoolViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("paged_pool_view_test"); }

  void blocksAreColouredByOwnerAndTheTableFollowsTheBatchPicker() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    startBatch(window, QStringLiteral("paged:4"), 3);
    if (QTest::currentTestFailed()) return;
    PagedPoolView* view = showPool(window);
    QVERIFY(!view->showingHint());
    const PoolView* pool = view->grid()->pool();
    QVERIFY(pool != nullptr);
    QCOMPARE(pool->tables.size(), size_t{3});
    QVERIFY2(pool->freeBlocks() > 0, "no free block to show: the pool grows geometrically and rollbacks free blocks");
    std::set<int64_t> owners;
    for (const PoolBlock& block : pool->blocks) {
      const QColor want = block.owner < 0 ? Palette::freeBlock() : Palette::sequence(block.owner);
      QCOMPARE(cellFill(view->grid(), view->grid()->cellRect(block.block)), want);
      owners.insert(block.owner);
      const QString hover = view->grid()->blockText(block.block);
      QVERIFY2(hover.contains(block.owner < 0 ? QStringLiteral("free") : QStringLiteral("sequence %1").arg(block.owner)),
               qPrintable(hover));
      if (!block.rows.empty()) {
        QVERIFY2(hover.contains(QStringLiteral("positions %1-%2").arg(block.rows.front().position).arg(block.rows.back().position)) ||
                     hover.contains(QStringLiteral("position %1").arg(block.rows.front().position)),
                 qPrintable(hover));
      }
      if (block.last_log >= 0) QVERIFY2(hover.contains(QStringLiteral("last: ")), qPrintable(hover));
    }
    QVERIFY2(owners.count(-1) && owners.count(0) && owners.count(1) && owners.count(2), "every sequence and free blocks");
    // The strip is the shown sequence's table, painted in its colour.
    for (int64_t shown : {0, 2}) {
      if (shown != window.context().snapshot()->shown_sequence) {
        auto* combo = window.findChild<QComboBox*>(QStringLiteral("sequenceCombo"));
        QVERIFY(combo != nullptr && combo->isVisibleTo(&window));
        const SnapshotPtr before = window.context().snapshotPtr();
        combo->setCurrentIndex(static_cast<int>(shown));
        emit combo->activated(static_cast<int>(shown));  // as a user's pick
        waitForSnapshot(window, before);
        view = showPool(window);
      }
      const PoolSequenceTable* table = view->tableStrip()->table();
      QVERIFY(table != nullptr);
      QCOMPARE(table->sequence, shown);
      QCOMPARE(table->entries.size(), view->grid()->pool()->table(shown)->entries.size());
      QVERIFY(!table->entries.empty());
      for (const PoolTableEntry& e : table->entries) {
        QCOMPARE(cellFill(view->tableStrip(), view->tableStrip()->cellRect(e.logical)), Palette::sequence(shown));
        QVERIFY(view->tableStrip()->entryText(e.logical).contains(QStringLiteral("pool block %1").arg(e.block)));
        QVERIFY(!view->tableStrip()->markedDangling(e.logical));
      }
    }
    QVERIFY2(view->legend()->text().contains(QStringLiteral("sequence&nbsp;2")), qPrintable(view->legend()->text()));
    // The header names the moment drawn: the cursor's (the latest here).
    const Cursor cursor = window.context().cursor();
    QVERIFY2(view->caption()->text().contains(
                 QStringLiteral("round %1 %2").arg(cursor.round).arg(QString::fromUtf8(phaseName(cursor.phase)))),
             qPrintable(view->caption()->text()));
  }

  void thePoolFollowsTheCursor() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    startBatch(window, QStringLiteral("paged:2"), 3);
    if (QTest::currentTestFailed()) return;
    PagedPoolView* view = showPool(window);
    const SessionSnapshot* snapshot = window.context().snapshot();
    QVERIFY(snapshot->target_pool_history != nullptr);
    std::set<std::vector<int64_t>> owner_sets;
    for (const Moment moment : {Moment{0, Phase::Prefill}, Moment{1, Phase::Verify}, Moment{1, Phase::Prune},
                                Moment{2, Phase::Verify}, snapshot->lastMoment()}) {
      Cursor cursor = window.context().cursor();
      cursor.round = moment.round;
      cursor.phase = moment.phase;
      window.context().setCursor(cursor);
      flush(window);
      const QString where = QStringLiteral("round %1 %2").arg(moment.round).arg(QString::fromUtf8(phaseName(moment.phase)));
      QVERIFY2(view->shownMoment().has_value() && view->shownMoment()->round == moment.round &&
                   view->shownMoment()->phase == moment.phase,
               qPrintable(where));
      QVERIFY2(view->caption()->text().contains(where), qPrintable(view->caption()->text()));
      // What core replays for that moment is what is drawn, cell by cell.
      const PoolView expected = poolViewAt(*snapshot->target_pool_history, moment);
      const PoolView* drawn = view->grid()->pool();
      QVERIFY(drawn != nullptr);
      QCOMPARE(drawn->blocks.size(), expected.blocks.size());
      std::vector<int64_t> owners;
      for (const PoolBlock& block : expected.blocks) {
        owners.push_back(block.owner);
        QCOMPARE(drawn->blocks[static_cast<size_t>(block.block)].owner, block.owner);
        const QColor want = block.owner < 0 ? Palette::freeBlock() : Palette::sequence(block.owner);
        QCOMPARE(cellFill(view->grid(), view->grid()->cellRect(block.block)), want);
      }
      owner_sets.insert(owners);
      const PoolSequenceTable* table = expected.table(snapshot->shown_sequence);
      QVERIFY(table != nullptr && view->tableStrip()->table() != nullptr);
      QCOMPARE(view->tableStrip()->table()->entries.size(), table->entries.size());
      for (const PoolTableEntry& e : table->entries) {
        QVERIFY(view->tableStrip()->entryText(e.logical).contains(QStringLiteral("pool block %1").arg(e.block)));
      }
    }
    QVERIFY2(owner_sets.size() >= 3, "the pool looked the same at most moments: the view did not follow the cursor");
  }

  void theRootCausesMomentDrawsTheDanglingBlock() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    SessionPanel* session = window.sessionPanel();
    session->setPrompt(kPrompts.join(QLatin1Char('\n')));
    session->setBatchLines(true);
    auto* box = session->findChild<QComboBox*>(QStringLiteral("cacheLayout"));
    QVERIFY(box != nullptr);
    box->setCurrentText(QStringLiteral("paged:2"));
    runDiff(window, "freed-block-reused");
    if (QTest::currentTestFailed()) return;
    const SessionSnapshot* snapshot = window.context().snapshot();
    QVERIFY(snapshot->diff && snapshot->diff->root_cause.has_value());
    const RootCause cause = *snapshot->diff->root_cause;
    QCOMPARE(QString::fromStdString(cause.kind), QStringLiteral("block"));
    QVERIFY(!cause.dangling_blocks.empty());
    QCOMPARE(snapshot->shown_sequence, cause.sequence);
    window.diffPanel()->goToRootCauseButton()->click();
    PagedPoolView* view = showPool(window);
    QVERIFY(view->shownMoment().has_value());
    QCOMPARE(view->shownMoment()->round, cause.round);
    QCOMPARE(view->shownMoment()->phase, cause.phase);
    const int64_t size = view->grid()->pool()->block_size;
    for (const DanglingBlock& d : cause.dangling_blocks) {
      const int64_t logical = d.first_row / size;
      QVERIFY2(view->tableStrip()->markedDangling(logical), qPrintable(QStringLiteral("logical block %1").arg(logical)));
      QVERIFY(view->grid()->danglingForShown(d.block));
      const QImage grid = view->grid()->grab().toImage();
      const QRect cell = view->grid()->cellRect(d.block);
      QCOMPARE(grid.pixelColor(cell.left() + 1, cell.center().y()), Palette::dangling());
    }
    // One phase earlier the sequence still owned those blocks: nothing dangles.
    Cursor cursor = window.context().cursor();
    Moment before;
    QVERIFY(previousMoment(cursor.moment(), &before));
    cursor.round = before.round;
    cursor.phase = before.phase;
    window.context().setCursor(cursor);
    flush(window);
    for (const DanglingBlock& d : cause.dangling_blocks) {
      QVERIFY(!view->tableStrip()->markedDangling(d.first_row / size));
      QVERIFY(!view->grid()->danglingForShown(d.block));
    }
  }

  void aDanglingEntryIsMarkedInTheStripAndTheGrid() {
    // A core-built batch whose sequence 1 frees blocks on rollback but keeps them mapped.
    const MainWindowOptions options = fixtureOptions();
    const std::shared_ptr<const CausalLM> target = loadCausalLM(options.models.target_dir, c10::TensorOptions().dtype(c10::kFloat));
    const std::shared_ptr<const CausalLM> draft = loadCausalLM(options.models.drafter_dir, c10::TensorOptions().dtype(c10::kFloat));
    SessionOptions session;
    session.gamma = 4;
    session.max_new_tokens = 16;
    session.ignore_eos = true;
    session.cache_layout = StorageLayout{true, 1};
    BatchSession batch(target, std::make_shared<ModelDrafter>(draft, "draft"), {{1, 2, 3, 4}, {5, 6, 7}, {8, 9, 10, 11, 12}},
                       session, {});
    batch.stepPhase();
    batch.sequence(1).targetCache()->blockTable()->setFreeMappedOnRollback(true);
    for (int r = 0; r < 3; ++r) batch.stepRound();
    auto snapshot = std::make_shared<SessionSnapshot>();
    snapshot->shown_sequence = 1;
    const auto pool = poolViewOf({&batch.sequence(0), &batch.sequence(1), &batch.sequence(2)}, CacheRole::Target);
    QVERIFY(pool.has_value());
    snapshot->target_pool = std::make_shared<const PoolView>(*pool);

    PagedPoolView view;
    view.resize(900, 600);
    view.show(snapshot);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(!view.showingHint());
    QCOMPARE(view.shownCache(), CacheRole::Target);  // the drafter's pool is contiguous here: Target only
    int64_t dangling = 0;
    for (const PoolTableEntry& e : pool->table(1)->entries) {
      QCOMPARE(view.tableStrip()->markedDangling(e.logical), e.dangling);
      if (!e.dangling) continue;
      QVERIFY(view.grid()->danglingForShown(e.block));
      ++dangling;
      // Framed in the dangling red, in the strip and around the pool block.
      const QImage strip = view.tableStrip()->grab().toImage();
      const QRect cell = view.tableStrip()->cellRect(e.logical);
      QCOMPARE(strip.pixelColor(cell.left() + 1, cell.center().y()), Palette::dangling());
      const QImage grid = view.grid()->grab().toImage();
      const QRect block = view.grid()->cellRect(e.block);
      QCOMPARE(grid.pixelColor(block.left() + 1, block.center().y()), Palette::dangling());
      QVERIFY(view.tableStrip()->entryText(e.logical).contains(QStringLiteral("dangling")));
      QVERIFY(view.grid()->blockText(e.block).contains(QStringLiteral("sequence 1 still maps it")));
    }
    QVERIFY2(dangling > 0, "no rollback of sequence 1 freed a block: the fixture pair accepted every draft");
    QVERIFY(view.legend()->text().contains(QStringLiteral("dangling")));
  }

  void aContiguousSessionShowsHowToGetAPool() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    startBatch(window, QStringLiteral("contiguous"), 1);
    if (QTest::currentTestFailed()) return;
    PagedPoolView* view = showPool(window);
    QVERIFY(view->showingHint());
    QVERIFY(view->hint()->isVisible());
    QVERIFY2(view->hint()->text().contains(QStringLiteral("--cache-layout paged:4")), qPrintable(view->hint()->text()));
    QVERIFY(view->grid()->pool() == nullptr);
  }

  void theLegendFitsAtProjectorSizesAndZooms() {
    MainWindow window(fixtureOptions());
    window.show();
    startBatch(window, QStringLiteral("paged:4"), 2);
    if (QTest::currentTestFailed()) return;
    for (const QSize size : {QSize(1024, 768), QSize(1280, 720)}) {
      for (const int zoom : {100, 150}) {
        window.resize(size);
        window.setPresenterZoom(zoom);
        window.resetLayout();
        QTest::qWait(200);
        PagedPoolView* view = showPool(window);
        QTest::qWait(50);
        const QString where = QStringLiteral("%1x%2 at %3%").arg(size.width()).arg(size.height()).arg(zoom);
        QVERIFY2(view->legend()->isVisible(), qPrintable(where));
        fits(view->legend(), where);
        if (QTest::currentTestFailed()) return;
        // The grid's cells grow with the zoom and stay inside the view.
        const QRect last = view->grid()->cellRect(static_cast<int64_t>(view->grid()->pool()->blocks.size()) - 1);
        QVERIFY2(last.right() <= view->grid()->width(), qPrintable(where));
      }
    }
  }

  void rowHistoryNamesAPagedRowsBlockAndOffset() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    startBatch(window, QStringLiteral("paged:4"), 2);
    if (QTest::currentTestFailed()) return;
    const SessionSnapshot* snapshot = window.context().snapshot();
    QVERIFY(snapshot->target_pool != nullptr);
    // The target's last row at the latest moment: held, so its block is the table's.
    window.context().setCursor(window.context().latest());
    const std::vector<int64_t> rows = physicalRows(*snapshot, CacheRole::Target, 0, snapshot->lastMoment());
    QVERIFY(rows.size() > 4);
    const int64_t row = static_cast<int64_t>(rows.size()) - 2;
    window.context().selectEntry(rows[static_cast<size_t>(row)]);
    flush(window);
    const auto place = snapshot->target_pool->placeOfRow(snapshot->shown_sequence, row);
    QVERIFY(place.has_value());
    auto* text = window.rowHistoryPanel()->findChild<QTextBrowser*>(QStringLiteral("rowHistory"));
    QVERIFY(text != nullptr);
    const QString shown = text->toPlainText();
    QVERIFY2(shown.contains(QStringLiteral("block %1, offset %2").arg(place->block).arg(place->offset)), qPrintable(shown));
    QCOMPARE(place->offset, row % 4);
  }

  void aLessonsBatchPromptsAndKvStepsAreCheckedByField() {
    const QStringList panels{QStringLiteral("kv"), QStringLiteral("tokens")};
    const struct {
      const char* json;
      const char* field;
    } cases[] = {
        {R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"prompts": ["only one"]}}]})",
         "pages[0].session.prompts"},
        {R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"prompts": ["a", 2]}}]})",
         "pages[0].session.prompts[1]"},
        {R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"prompt": "p", "prompts": ["a", "b"]}}]})",
         "pages[0].session.prompts"},
        {R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"cache_layout": "paged:0"}}]})",
         "pages[0].session.cache_layout"},
        {R"({"title": "x", "pages": [{"title": "a", "text": "t", "panel": "kv", "step": "blocks"}]})", "pages[0].step"},
    };
    for (const auto& c : cases) {
      LessonError error;
      QVERIFY2(!parseLesson(QByteArray(c.json), QStringLiteral("l.json"), panels, &error).has_value(), c.json);
      QVERIFY2(error.message.contains(QString::fromUtf8(c.field)), qPrintable(error.message));
    }
    LessonError error;
    const auto good = parseLesson(
        R"({"title": "x", "pages": [{"title": "a", "text": "{batch_accepted}", "panel": "kv", "step": "pool",
            "session": {"prompts": ["a", "b", "c"], "cache_layout": "paged:4"}}]})",
        QStringLiteral("l.json"), panels, &error);
    QVERIFY2(good.has_value(), qPrintable(error.message));
    const LessonSession session = good->sessionOf(0);
    QCOMPARE(session.prompt, QStringLiteral("a"));
    QCOMPARE(session.more_prompts, (QStringList{QStringLiteral("b"), QStringLiteral("c")}));
    QVERIFY(session.options.cache_layout.paged);
    QCOMPARE(session.options.cache_layout.block_size, int64_t{4});
  }

  void batchLessonNumbersComeFromTheSession() {
    MainWindowOptions options;  // the bundled pair (else the fixture pair), as the lessons
    options.restore_layout = false;
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    const int lesson = lessonIndex(window, QStringLiteral("07-batches-and-paged-caches.json"));
    QVERIFY(lesson >= 0);
    // Page 1: each sequence's acceptance in the round shown.
    window.openLesson(lesson, 0);
    QTRY_VERIFY_WITH_TIMEOUT(window.lessonRunner()->ready() && !window.controller().busy(), kTimeout);
    window.lessonPanel()->flushRefresh();
    const SessionSnapshot* snapshot = window.context().snapshot();
    const Cursor cursor = window.context().cursor();
    QCOMPARE(snapshot->batch_accepted.size(), size_t{3});
    QStringList accepted;
    for (size_t b = 0; b < 3; ++b) {
      accepted << QStringLiteral("sequence %1: %2").arg(b).arg(snapshot->batch_accepted[b][static_cast<size_t>(cursor.round)]);
    }
    QString text = window.lessonPanel()->pageText();
    QVERIFY2(text.contains(accepted.join(QStringLiteral(", "))), qPrintable(text));
    // Page 4: the blocks a rollback frees, from the round and the pool's block size.
    window.openLesson(lesson, 3);
    QTRY_VERIFY_WITH_TIMEOUT(window.lessonRunner()->ready() && !window.controller().busy(), kTimeout);
    window.lessonPanel()->flushRefresh();
    QVERIFY(window.kvCachePanel()->showingPoolTab());
    snapshot = window.context().snapshot();
    const RoundRecord* round = snapshot->round(window.context().cursor().round);
    QVERIFY(round != nullptr && snapshot->target_pool != nullptr);
    const int64_t size = snapshot->target_pool->block_size;
    QCOMPARE(size, int64_t{4});
    const auto blocks = [](int64_t rows, int64_t block) { return (rows + block - 1) / block; };
    const int64_t verify_rows = round->start_length + static_cast<int64_t>(round->drafts.size());
    const int64_t kept = round->start_length + round->accepted;
    text = window.lessonPanel()->pageText();
    QVERIFY2(text.contains(QStringLiteral("rows filled %1 blocks").arg(blocks(verify_rows, size))), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("returns %1 whole block").arg(blocks(verify_rows, size) - blocks(kept, size))),
             qPrintable(text));
    // Another pool (block size 1) and other acceptances give other numbers: none is typed in.
    SessionSnapshot other = *snapshot;
    auto pool = std::make_shared<PoolView>(*snapshot->target_pool);
    pool->block_size = 1;
    other.target_pool = pool;
    auto history = std::make_shared<PoolHistory>(*snapshot->target_pool_history);
    history->block_size = 1;
    other.target_pool_history = history;
    const LessonPage& page = window.lessonPanel()->lessons()[lesson].pages[3];
    const QString refilled = fillLessonText(page.text, &other, window.context().cursor());
    QVERIFY2(refilled.contains(QStringLiteral("filled <b>%1</b> blocks").arg(verify_rows)), qPrintable(refilled));
    QVERIFY2(refilled.contains(QStringLiteral("returns <b>%1</b> whole").arg(verify_rows - kept)), qPrintable(refilled));
  }
};

QTEST_MAIN(PagedPoolViewTest)
#include "paged_pool_view_test.moc"
