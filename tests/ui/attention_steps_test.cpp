// The Attention Step by Step panel on real models: the weights it draws are
// attentionSteps' weights for the same query (recomputed here from a model
// this test loads itself), a "what if" removal draws the removed rows at 0
// and the rest renormalised, the query follows the shared cursor, and GPT-2
// says it has no rotary embedding.
// libtorch first: Qt's `slots` macro would break its headers.
#include <torch/types.h>

#include "core/explain/attention_steps.h"
#include "core/model/model_bundle.h"

#include <QDir>
#include <QFile>
#include <QFrame>
#include <algorithm>
#include <numeric>
#include <qcustomplot.h>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QDockWidget>
#include <QtTest>
#include "tests/ui/ui_test_support.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/StepBarPlot.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

constexpr double kTolerance = 1e-5;

// Selects (layer, query head, position) and waits for the panel to show it.
void explain(MainWindow& window, int64_t layer, int head, int64_t position) {
  AttentionStepsPanel* panel = window.attentionStepsPanel();
  window.context().setLayerHead(CacheRole::Target, layer, window.context().cursor().head);
  panel->setQueryHead(head);
  window.context().selectPosition(position);
  QTRY_VERIFY_WITH_TIMEOUT(panel->explanation() && panel->explanation()->request.position == position &&
                               panel->explanation()->request.layer == layer && panel->explanation()->request.head == head,
                           kTimeout);
  panel->flushRefresh();
}

// The positions of the target view's rows in `rows` (view row indices).
std::vector<int64_t> positionsOf(const KvHeatmapView& view, const SessionSnapshot& snapshot,
                                 const std::vector<int>& rows) {
  std::vector<int64_t> out;
  for (int r : rows) {
    const int64_t entry = view.matrix().rows[static_cast<size_t>(r)].entry;
    out.push_back(snapshot.entries[static_cast<size_t>(entry)].position);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

class AttentionStepsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("attention_steps_test"); }

  void weightsAreTheModelsAndWhatIfRenormalises() {
    MainWindowOptions options;  // the bundled pair (else the fixture pair)
    options.restore_layout = false;
    MainWindow window(options);
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);
    if (QTest::currentTestFailed()) return;
    const SessionSnapshot& snapshot = *window.context().snapshot();
    const int64_t layer = snapshot.target.layers - 1;
    const int head = static_cast<int>(snapshot.target.heads - 1);  // the last head: kv head > 0 under GQA
    const int64_t position = snapshot.prompt_length - 1;
    explain(window, layer, head, position);
    if (QTest::currentTestFailed()) return;
    AttentionStepsPanel* panel = window.attentionStepsPanel();
    // The kv head the panel chose is shared with every panel.
    QCOMPARE(window.context().cursor().head, int64_t{head} / (snapshot.target.heads / snapshot.target.kv_heads));

    // The same query, computed here from a model this test loads itself.
    // float32, as the session loads it (no dtype would keep the checkpoint's bf16).
    const ModelBundle bundle = loadModelBundle(defaultModelDirectories().target_dir,
                                               torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU));
    const std::vector<int64_t> ids(snapshot.sequence.begin(), snapshot.sequence.begin() + position + 1);
    QVERIFY(panel->explanation()->request.ids == ids);
    const AttentionSteps steps = attentionSteps(*bundle.model, ids, {layer, head, position});
    const QVector<double> drawn = panel->weightsPlot()->values(0);
    QCOMPARE(drawn.size(), int(position + 1));
    for (int j = 0; j <= position; ++j) {
      QVERIFY2(std::abs(drawn[j] - steps.weights[j].item<double>()) < kTolerance,
               qPrintable(QStringLiteral("key %1: drawn %2, attentionSteps %3").arg(j).arg(drawn[j]).arg(steps.weights[j].item<double>())));
    }
    // The o_proj card: this head's share and the layer's output after o_proj.
    auto* card = panel->findChild<QFrame*>(QStringLiteral("stepsProjection"));
    QVERIFY(card != nullptr && card->isVisible() && card->width() > 0 && card->height() > 0);
    QVERIFY2(panel->projectionText().contains(QStringLiteral("9. Through o_proj: head %1").arg(head)),
             qPrintable(panel->projectionText()));
    QCOMPARE(panel->projectionPlot()->seriesCount(), 2);
    const QVector<double> share = panel->projectionPlot()->values(0), projected = panel->projectionPlot()->values(1);
    QCOMPARE(share.size(), int(steps.head_contribution.size(0)));
    QCOMPARE(projected.size(), int(steps.projected.size(0)));
    double worst_projection = 0;
    for (int i = 0; i < share.size(); ++i) {
      worst_projection = std::max({worst_projection, std::abs(share[i] - steps.head_contribution[i].item<double>()),
                                   std::abs(projected[i] - steps.projected[i].item<double>())});
    }
    QVERIFY2(worst_projection < kTolerance, qPrintable(QString::number(worst_projection)));
    QVERIFY(panel->explanation()->projection_difference < kTolerance);

    QCOMPARE(panel->keyTable()->rowCount(), int(position + 1));
    QVERIFY(panel->statusText().contains(QStringLiteral("kv head %1").arg(steps.kv_head)));
    QVERIFY(panel->rotaryText().contains(QStringLiteral("Rotary embedding")));

    // What if rows 1 and 3 were gone: 0 there, the rest renormalised (layer
    // L's q and its other keys do not depend on the rows removed from it).
    panel->setRemoved(1, true);
    panel->setRemoved(3, true);
    panel->recomputeButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(panel->whatIf() != nullptr, kTimeout);
    QCOMPARE(panel->weightsPlot()->seriesCount(), 2);
    const QVector<double> after = panel->weightsPlot()->values(1);
    const double kept = 1.0 - drawn[1] - drawn[3];
    for (int j = 0; j <= position; ++j) {
      const double expected = j == 1 || j == 3 ? 0.0 : drawn[j] / kept;
      QVERIFY2(std::abs(after[j] - expected) < kTolerance, qPrintable(QStringLiteral("row %1: %2 vs %3").arg(j).arg(after[j]).arg(expected)));
    }
    QCOMPARE(panel->keyTable()->item(1, 7)->text(), QStringLiteral("removed"));
    QVERIFY(panel->whatIfText().contains(QStringLiteral("KL")));
    QVERIFY(panel->whatIfText().contains(QStringLiteral("removed rows 1, 3")));

    // Moving the cursor drops the old what-if and explains the new query.
    explain(window, 0, 0, position - 1);
    if (QTest::currentTestFailed()) return;
    QVERIFY(panel->whatIf() == nullptr);
    QCOMPARE(panel->weightsPlot()->seriesCount(), 1);
    QCOMPARE(panel->weightsPlot()->values(0).size(), int(position));
  }

  // The KV view marks exactly the key rows the explanation reads (through
  // the shared context), the query's own row, and the rows ticked for what-if.
  void kvViewMarksTheRowsTheQueryReads() {
    MainWindow window(fixtureOptions());
    window.resize(1280, 720);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);
    if (QTest::currentTestFailed()) return;
    const SessionSnapshot& snapshot = *window.context().snapshot();
    const int64_t layer = snapshot.target.layers - 1;
    const int head = static_cast<int>(snapshot.target.heads - 1);
    const int64_t position = snapshot.prompt_length - 1;
    // The panel on screen (its tab raised): the KV view outlines only what a visible panel explains.
    window.findChild<QDockWidget*>(QStringLiteral("attentionStepsDock"))->raise();
    explain(window, layer, head, position);
    if (QTest::currentTestFailed()) return;
    AttentionStepsPanel* panel = window.attentionStepsPanel();
    const AttentionExplanation& e = *panel->explanation();
    QTRY_VERIFY(window.context().attentionFocus().active);
    const AttentionFocus& focus = window.context().attentionFocus();
    QVERIFY(focus.active);
    QCOMPARE(focus.layer, layer);
    QCOMPARE(focus.kv_head, e.kv_head);
    QCOMPARE(focus.query_position, position);

    window.kvCachePanel()->flushRefresh();
    KvHeatmapView* view = window.kvCachePanel()->targetView();
    QCOMPARE(int64_t{view->layer()}, layer);
    QCOMPARE(int64_t{view->head()}, e.kv_head);
    // The highlighted set is the explanation's key rows: positions 0..P, one row each.
    std::vector<int64_t> keys(static_cast<size_t>(e.keyCount()));
    std::iota(keys.begin(), keys.end(), 0);
    const std::vector<int64_t> marked = positionsOf(*view, snapshot, view->focusKeyRows());
    QCOMPARE(marked, keys);
    QCOMPARE(positionsOf(*view, snapshot, view->focusQueryRows()), std::vector<int64_t>{position});
    QVERIFY(view->focusTickedRows().empty());
    QCOMPARE(window.kvCachePanel()->drafterView()->focusKeyRows().size(), size_t{0});  // the target's rows only
    // Drawn: a rectangle per run of marked lines, beyond the selection's.
    int drawn = 0;
    for (int i = 0; i < view->plot()->itemCount(); ++i) {
      auto* rect = qobject_cast<QCPItemRect*>(view->plot()->item(i));
      if (rect && rect->pen().color() == QColor(200, 0, 200)) ++drawn;  // the query's own row
    }
    QCOMPARE(drawn, 1);

    // Ticked rows are marked apart, and follow the ticks without a recompute.
    panel->setRemoved(1, true);
    panel->setRemoved(3, true);
    QCOMPARE(window.context().attentionFocus().ticked_positions, (std::vector<int64_t>{1, 3}));
    QCOMPARE(positionsOf(*view, snapshot, view->focusTickedRows()), (std::vector<int64_t>{1, 3}));
    panel->setRemoved(3, false);
    QCOMPARE(positionsOf(*view, snapshot, view->focusTickedRows()), std::vector<int64_t>{1});

    // Another layer: the marks follow the new query (and the old ticks go).
    const int64_t other = layer == 0 ? 1 : 0;
    explain(window, other, head, position);
    if (QTest::currentTestFailed()) return;
    window.kvCachePanel()->flushRefresh();
    QCOMPARE(window.context().attentionFocus().layer, other);
    QCOMPARE(int64_t{view->layer()}, other);
    QCOMPARE(positionsOf(*view, snapshot, view->focusKeyRows()), keys);
    QVERIFY(view->focusTickedRows().empty());

    // The panel's tab behind another (Verify Attention raised): no outline
    // left that nobody can explain; raised again, the outline is back.
    auto* steps_dock = window.findChild<QDockWidget*>(QStringLiteral("attentionStepsDock"));
    auto* verify_dock = window.findChild<QDockWidget*>(QStringLiteral("attentionDock"));
    QVERIFY(steps_dock && verify_dock && window.tabifiedDockWidgets(steps_dock).contains(verify_dock));
    verify_dock->raise();
    QTRY_VERIFY(!window.context().attentionFocus().active);
    window.kvCachePanel()->flushRefresh();
    QVERIFY(view->focusKeyRows().empty());
    QVERIFY(!view->title().contains(QStringLiteral("reads")));
    steps_dock->raise();
    QTRY_VERIFY(window.context().attentionFocus().active);
    window.kvCachePanel()->flushRefresh();
    QCOMPARE(positionsOf(*view, snapshot, view->focusKeyRows()), keys);
  }

  void aReplayedTraceIsExplainedWithTheLoadedTargetWhenItIsTheTracesModel() {
    // Live first: the explanation of a moment, then the same moment replayed from the saved trace.
    const QString path = QDir::temp().filePath(QStringLiteral("kvscope-steps-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);
    if (QTest::currentTestFailed()) return;
    explain(window, 1, 1, 4);
    if (QTest::currentTestFailed()) return;
    const AttentionExplanation live = *window.attentionStepsPanel()->explanation();  // a copy: the panel replaces its own
    window.saveTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && !window.controller().busy(), kTimeout);
    window.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() && window.context().snapshot()->replay_only &&
                                 !window.controller().busy(), kTimeout);
    window.context().goToRound(window.context().snapshot()->lastRound());
    explain(window, 1, 1, 4);
    if (QTest::currentTestFailed()) return;
    AttentionStepsPanel* panel = window.attentionStepsPanel();
    // The live session's answer to the same request may still be shown while
    // the replayed moment's is computed: wait for the replay's.
    QTRY_VERIFY2_WITH_TIMEOUT(panel->statusText().contains(QStringLiteral("explained with the loaded target")),
                              qPrintable(panel->statusText()), kTimeout);
    const AttentionExplanation& replayed = *panel->explanation();
    QCOMPARE(replayed.request.ids, live.request.ids);
    QCOMPARE(replayed.weights.size(), live.weights.size());
    for (size_t i = 0; i < live.weights.size(); ++i) QCOMPARE(replayed.weights[i], live.weights[i]);

    // Another target loaded (same shape is not enough without the name, and GPT-2's shape differs): refused, naming both.
    MainWindowOptions other = fixtureOptions();
    other.models.target_dir = KVSCOPE_FIXTURES "/models/qwen2-tiny";
    other.models.drafter_dir = KVSCOPE_FIXTURES "/models/qwen2-tiny";
    MainWindow second(other);
    QTRY_VERIFY_WITH_TIMEOUT(second.context().snapshot() != nullptr && !second.controller().busy(), kTimeout);
    second.openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(second.context().snapshot() && second.context().snapshot()->replay_only &&
                                 !second.controller().busy(), kTimeout);
    second.context().selectPosition(4);
    second.attentionStepsPanel()->flushRefresh();
    QTRY_VERIFY_WITH_TIMEOUT(second.attentionStepsPanel()->statusText().contains(QStringLiteral("is not the model the trace ran")), kTimeout);
    const QString refused = second.attentionStepsPanel()->statusText();
    QVERIFY2(refused.contains(QStringLiteral("qwen2-tiny")) && refused.contains(QStringLiteral("llama-tiny")), qPrintable(refused));
    QVERIFY(second.attentionStepsPanel()->explanation() == nullptr);
    QFile::remove(path);
  }

  void badChannelsAreRefusedInPlace() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    explain(window, 0, 0, 3);
    if (QTest::currentTestFailed()) return;
    AttentionStepsPanel* panel = window.attentionStepsPanel();
    panel->zeroKeyChannels()->setText(QStringLiteral("3-x"));
    panel->recomputeButton()->click();
    QVERIFY(panel->whatIfText().contains(QStringLiteral("channels")));
    // A channel past head_dim: the core's error, shown in the panel (no dialog).
    panel->zeroKeyChannels()->setText(QStringLiteral("100000"));
    panel->recomputeButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(panel->whatIfText().contains(QStringLiteral("color:#c00")), kTimeout);
    QVERIFY(panel->explanation() != nullptr);
    QVERIFY(errorDialog() == nullptr);
  }

  void gpt2SaysItHasNoRotaryEmbedding() {
    MainWindowOptions options;
    options.models.target_dir = KVSCOPE_FIXTURES "/models/gpt2-tiny";
    options.models.drafter_kind = DrafterKind::Ngram;
    options.restore_layout = false;
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    explain(window, 0, 1, 2);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(window.attentionStepsPanel()->rotaryText().contains(QStringLiteral("GPT-2: no rotary embedding")),
             qPrintable(window.attentionStepsPanel()->rotaryText()));
    QVERIFY2(window.attentionStepsPanel()->projectionText().contains(QStringLiteral("head 1's share")),
             qPrintable(window.attentionStepsPanel()->projectionText()));
    QCOMPARE(window.attentionStepsPanel()->projectionPlot()->values(0).size(), 64);  // n_embd
  }
};

QTEST_MAIN(AttentionStepsTest)
#include "attention_steps_test.moc"
