// A batched capture in the GUI: the status bar's sequence picker lists every
// sequence with its verdict, opens on the run's root cause's sequence, and
// every panel follows the sequence picked (the snapshot is that sequence's);
// it is hidden for a capture of one sequence and for a live session of one
// sequence, and lists a live batch's sequences. The
// Round Timeline marks every sequence's accepted drafts in each round. The
// fixture is batched_loops.py's uniform-advance bug on three prompts
// (tests/python/make_batch_fixture.py).
#include <QComboBox>
#include <cmath>
#include <map>
#include <set>
#include <QTextBrowser>
#include <QtTest>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/SequencePicker.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const char* const kBatchCapture = KVSCOPE_FIXTURES "/captures/uniform-advance-batch3-topk.kvcapture";
const char* const kOneSequence = KVSCOPE_FIXTURES "/captures/verify-mask-leak-dynamic-topk.kvcapture";

bool captureShown(MainWindow& window) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  return snapshot != nullptr && snapshot->from_capture && !window.controller().busy();
}

}  // namespace

class SequencePickerTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("sequence_picker_test"); }

  void everyPanelFollowsThePickedSequence() {
    MainWindowOptions options = fixtureOptions();
    options.open_file = kBatchCapture;
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(captureShown(window), kTimeout);
    auto* picker = window.findChild<SequencePicker*>(QStringLiteral("sequencePicker"));
    auto* combo = window.findChild<QComboBox*>(QStringLiteral("sequenceCombo"));
    QVERIFY(picker != nullptr && combo != nullptr);
    QTRY_VERIFY(picker->isVisible());
    QCOMPARE(combo->count(), 3);
    // Opened on the run's root cause, whose sequence the snapshot's root cause names.
    const SessionSnapshot* first = window.context().snapshot();
    QVERIFY(first->diff && first->diff->root_cause);
    const int cause_sequence = static_cast<int>(first->diff->root_cause->sequence);
    QCOMPARE(combo->currentIndex(), cause_sequence);
    QVERIFY2(combo->currentText().endsWith(QStringLiteral("root cause")), qPrintable(combo->currentText()));
    for (int b = 0; b < combo->count(); ++b) {
      QVERIFY2(combo->itemText(b).startsWith(QStringLiteral("sequence %1: ").arg(b)), qPrintable(combo->itemText(b)));
    }

    // The Round Timeline marks every sequence's accepted drafts per round; the
    // shown sequence's markers (from the check's frontiers) are its bars (from
    // the snapshot's rounds), and the sequences accept differently somewhere.
    TimelinePanel* timeline = window.timelinePanel();
    timeline->flushRefresh();
    const auto markers = timeline->sequenceMarkers();
    QCOMPARE(static_cast<int>(markers.size()), 3);
    QVERIFY(timeline->findChild<QWidget*>(QStringLiteral("timelineBatchLegend"))->isVisible());
    std::map<int64_t, double> bars;
    for (const RoundRecord& round : first->rounds) {
      if (round.index >= 1 && round.next_token >= 0) bars[round.index] = static_cast<double>(round.accepted);
    }
    std::map<int64_t, std::set<double>> per_round;
    for (size_t b = 0; b < markers.size(); ++b) {
      QVERIFY(!markers[b].empty());
      for (const auto& [x, accepted] : markers[b]) {
        const auto round = static_cast<int64_t>(std::lround(x));
        QVERIFY2(std::abs(x - static_cast<double>(round)) < 0.35, "a marker sits within its round's bar");
        per_round[round].insert(accepted);
        if (static_cast<int>(b) == cause_sequence && bars.count(round)) QCOMPARE(accepted, bars[round]);
      }
    }
    QVERIFY2(std::any_of(per_round.begin(), per_round.end(), [](const auto& r) { return r.second.size() > 1; }),
             "the fixture's sequences accept differently in some round");

    const int other = (cause_sequence + 2) % 3;
    emit combo->activated(other);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != first && captureShown(window), kTimeout);
    QCOMPARE(combo->currentIndex(), other);
    QVERIFY(picker->isVisible());
    flush(window);
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QStringLiteral("shown: sequence %1").arg(other)), qPrintable(report));
    const SessionSnapshot* shown = window.context().snapshot();
    if (shown->diff && shown->diff->root_cause) QCOMPARE(static_cast<int>(shown->diff->root_cause->sequence), other);
    // The workspace is the capture's still, and the cursor is on the shown sequence's own root cause.
    if (shown->diff && shown->diff->root_cause) {
      QTRY_COMPARE(window.context().cursor().round, shown->diff->root_cause->round);
    }

    // One sequence: nothing to pick.
    window.openCapture(QString::fromUtf8(kOneSequence));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != shown && captureShown(window), kTimeout);
    QTRY_VERIFY(!picker->isVisible());
  }

  // A live batch (several prompts decoded together, docs/batching.md): the
  // picker lists its sequences with their accepted drafts, picking one shows
  // that sequence's books in every panel, and the Round Timeline marks every
  // sequence's acceptance.
  void aLiveBatchShowsOneSequenceAtATime() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    SessionSpec spec = *window.sessionPanel()->sessionSpec();
    spec.prompt = "Once upon a time";
    spec.more_prompts = {"The", "A long time ago in a galaxy far, far away there"};
    spec.options.max_new_tokens = 12;
    window.controller().startSession(spec);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->batch_accepted.size() == 3 && !window.controller().busy(),
                             kTimeout);
    window.controller().run();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->finished && !window.controller().busy(), kTimeout);
    auto* picker = window.findChild<SequencePicker*>(QStringLiteral("sequencePicker"));
    auto* combo = window.findChild<QComboBox*>(QStringLiteral("sequenceCombo"));
    QVERIFY(picker != nullptr && combo != nullptr);
    QTRY_VERIFY(picker->isVisible());
    QCOMPARE(combo->count(), 3);
    for (int b = 0; b < 3; ++b) {
      QVERIFY2(combo->itemText(b).startsWith(QStringLiteral("sequence %1: ").arg(b)), qPrintable(combo->itemText(b)));
    }
    const SessionSnapshot* first = window.context().snapshot();
    QCOMPARE(first->shown_sequence, int64_t{0});
    emit combo->activated(2);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != first && !window.controller().busy(), kTimeout);
    const SessionSnapshot* third = window.context().snapshot();
    QCOMPARE(third->shown_sequence, int64_t{2});
    QVERIFY(third->sequence != first->sequence);
    QCOMPARE(combo->currentIndex(), 2);
    TimelinePanel* timeline = window.timelinePanel();
    timeline->flushRefresh();
    QCOMPARE(static_cast<int>(timeline->sequenceMarkers().size()), 3);
  }

  // Every rank's capture of a tensor-parallel run opens as one run, on the
  // rank whose cache broke first (tests/python/make_rank_fixtures.py: rank 1's
  // rollback keeps a rejected draft); in either order.
  void theRanksOfARunOpenAsOneRun() {
    MainWindowOptions options = fixtureOptions();
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.openCaptures({QString::fromUtf8(KVSCOPE_FIXTURES "/captures/tp-rank1.kvcapture"),
                         QString::fromUtf8(KVSCOPE_FIXTURES "/captures/tp-rank0.kvcapture")});
    QTRY_VERIFY_WITH_TIMEOUT(captureShown(window), kTimeout);
    const SessionSnapshot* shown = window.context().snapshot();
    QVERIFY(shown->diff && shown->diff->root_cause);
    QCOMPARE(shown->diff->root_cause->kind, std::string("crop"));
    flush(window);
    const QString report = window.diffPanel()->report()->toPlainText();
    QVERIFY2(report.contains(QStringLiteral("a tensor-parallel run of 2 ranks")), qPrintable(report));
    QVERIFY2(report.contains(QStringLiteral("shown: rank 1")), qPrintable(report));
    QVERIFY2(window.windowTitle().contains(QStringLiteral("1 more rank")), qPrintable(window.windowTitle()));
  }
};

QTEST_MAIN(SequencePickerTest)
#include "sequence_picker_test.moc"
