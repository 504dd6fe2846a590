// The Compression panel on the bundled target: what it draws is
// read back from its plots and compared with runCompressionLab run here on a
// model this test loads itself (not with the panel's own copy of the
// result): the removed rows of the cursor's layer and kv head, in the mask
// and in the scores; a layer / head change redraws them; entries zeroed by
// element pruning; two slots give two curves with the core's KL; budget 1.0
// removes nothing and gives KL 0; settings the core refuses show its
// message and run nothing, and a bad slot B does not stop slot A. At a
// laptop's 1024x768 the summary's numbers are not elided, slot B is seen
// whole (no horizontal scrolling), the KL legend fits its plot and the
// output error's axis labels keep apart.
// libtorch first: Qt's `slots` macro would break its headers.
#include <torch/types.h>

#include "core/compress/compression_lab.h"
#include "core/compress/self_speculation.h"
#include "core/model/model_bundle.h"

#include <QComboBox>
#include <QHeaderView>
#include <QScrollArea>
#include <QScrollBar>
#include <QToolButton>
#include <QDockWidget>
#include <QSpinBox>
#include <QPushButton>
#include <QTableWidget>
#include <QtTest>
#include <memory>
#include <set>

#include <qcustomplot.h>

#include "tests/ui/ui_test_support.h"
#include "ui/widgets/CompressionErrorPlot.h"
#include "ui/widgets/CompressionMetricsPlot.h"
#include "ui/widgets/CompressionSettingsForm.h"
#include "ui/widgets/CompressionSlotView.h"
#include "ui/widgets/SelfSpeculationView.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

// Long enough that a 25% budget leaves whole runs of removed rows (Genesis 1, the lab's sweep text).
const char* kPrompt =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light.";
constexpr int kSteps = 8;

// The positions of [0, rows) not in `kept`: what the core says the policy removed.
std::vector<int64_t> removedByCore(const CompressionResult& result, int64_t layer, int64_t kv_head) {
  const std::vector<int64_t>& kept = result.kept[static_cast<size_t>(layer)][static_cast<size_t>(kv_head)];
  const std::set<int64_t> held(kept.begin(), kept.end());
  std::vector<int64_t> removed;
  for (int64_t p = 0; p < result.prefill_rows; ++p) {
    if (held.count(p) == 0) removed.push_back(p);
  }
  return removed;
}

QString list(const std::vector<int64_t>& v) {
  QStringList parts;
  for (int64_t x : v) parts << QString::number(x);
  return parts.join(QLatin1Char(','));
}

}  // namespace

class CompressionPanelTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    useTestSettings("compression_panel_test");
    MainWindowOptions options;  // the bundled pair (else the fixture pair)
    options.restore_layout = false;
    options.session.prompt = kPrompt;
    window_ = std::make_unique<MainWindow>(options);
    window_->resize(1280, 720);
    window_->show();
    QTRY_VERIFY_WITH_TIMEOUT(window_->context().snapshot() != nullptr && !window_->controller().busy(), kTimeout);
    window_->dock(QStringLiteral("compressionDock"))->raise();
    bundle_ = std::make_unique<ModelBundle>(loadModelBundle(defaultModelDirectories().target_dir,
                                                            torch::TensorOptions().dtype(torch::kFloat32)));
    const SessionSnapshot& snapshot = *window_->context().snapshot();
    prompt_.assign(snapshot.sequence.begin(), snapshot.sequence.begin() + snapshot.prompt_length);
    QVERIFY2(prompt_.size() > 30, "the prompt should give the policy rows to remove");
    panel()->maxNewBox()->setValue(kSteps);
  }
  void cleanupTestCase() { window_.reset(); }

  // h2o at 25%: the mask and the scores show exactly the core's removed rows, per layer and kv head.
  void removedRowsAreTheCores() {
    QVERIFY(run({QStringLiteral("h2o:0.25")}));
    const CompressionResult core = lab(CompressionSpec::evicting(EvictionPolicy::H2O, 0.25));
    const SessionSnapshot& snapshot = *window_->context().snapshot();
    select(0, 0);
    const std::vector<int64_t> first = removedByCore(core, 0, 0);
    QVERIFY(!first.empty());
    checkShown(core, 0, 0);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(panel()->slotView(0)->caption().contains(QStringLiteral("%1 of %2 rows removed").arg(first.size()).arg(core.prefill_rows)),
             qPrintable(panel()->slotView(0)->caption()));

    // Another layer and kv head (the shared cursor): the mask follows, and it is not the same set.
    const int64_t layer = snapshot.target.layers - 1, head = snapshot.target.kv_heads - 1;
    QVERIFY(removedByCore(core, layer, head) != first);
    select(layer, head);
    QCOMPARE(panel()->layerBox()->currentIndex(), int(layer));
    QCOMPARE(panel()->headBox()->currentIndex(), int(head));
    checkShown(core, layer, head);
    if (QTest::currentTestFailed()) return;
    // The panel's own pickers move the cursor of every panel.
    panel()->layerBox()->setCurrentIndex(1);
    emit panel()->layerBox()->activated(1);
    flush(*window_);
    QCOMPARE(window_->context().cursor().layer, int64_t{1});
    checkShown(core, 1, head);
  }

  // Per-token pruning at 50% (dense window 4): the white cells are the core's zeroed K entries of kept rows.
  void zeroedEntriesAreTheCores() {
    CompressionSettingsForm* a = panel()->form(0);
    QVERIFY(a->applyShorthand(QStringLiteral("per-token:0.5"), nullptr));
    a->setDenseWindow(4);
    panel()->form(1)->setEnabledSlot(false);
    QVERIFY(runNow());
    CompressionSpec spec;
    spec.pruning = PruneSettings{};
    spec.pruning->k_sparsity = spec.pruning->v_sparsity = 0.5;
    spec.pruning->dense_window = 4;
    CompressionInput input{prompt_, {}, kSteps};
    input.record_cache = true;
    const CompressionResult core = runCompressionLab(*bundle_->model, input, spec);
    select(0, 1);
    const int64_t zeroed = core.k_keep[0][1].logical_not().sum().item<int64_t>();
    QVERIFY(zeroed > 0);
    QCOMPARE(panel()->slotView(0)->shownZeroedEntries(), zeroed);
    QVERIFY(panel()->slotView(0)->shownRemovedRows().empty());  // pruning removes no row
    panel()->setShowingValues(true);
    flush(*window_);
    QCOMPARE(panel()->slotView(0)->shownZeroedEntries(), core.v_keep[0][1].logical_not().sum().item<int64_t>());
    panel()->setShowingValues(false);
    a->setDenseWindow(32);
  }

  // h2o vs streaming at 25%: two curves, each the core's KL per step, and they differ.
  void twoSlotsGiveTwoCurves() {
    QVERIFY(run({QStringLiteral("h2o:0.25"), QStringLiteral("streaming:0.25")}));
    CompressionMetricsPlot* metrics = panel()->metricsPlot();
    QCOMPARE(metrics->curveCount(), 2);
    const CompressionResult h2o = lab(CompressionSpec::evicting(EvictionPolicy::H2O, 0.25));
    const CompressionResult streaming = lab(CompressionSpec::evicting(EvictionPolicy::Streaming, 0.25));
    for (const auto& [curve, core] : {std::pair{0, &h2o}, std::pair{1, &streaming}}) {
      const std::vector<double> kl = metrics->klValues(curve), mass = metrics->massValues(curve);
      QCOMPARE(kl.size(), core->steps.size());
      for (size_t i = 0; i < kl.size(); ++i) {
        QVERIFY2(std::abs(kl[i] - core->steps[i].kl) < 1e-9, qPrintable(QStringLiteral("curve %1 step %2").arg(curve).arg(i)));
        QVERIFY(std::abs(mass[i] - core->steps[i].attention_mass) < 1e-9);
      }
    }
    QVERIFY(metrics->klValues(0) != metrics->klValues(1));
    // Slot B's mask is streaming's: the sinks kept, the middle gone.
    select(0, 0);
    QCOMPARE(panel()->slotView(1)->shownRemovedRows(), removedByCore(streaming, 0, 0));
    QVERIFY(panel()->summaryTable()->item(0, 1)->text().startsWith(QString::number(streaming.kl_mean, 'g', 3)));
    // The output error of both, on one scale: the core's numbers.
    CompressionErrorPlot* error = panel()->errorPlot();
    QVERIFY(std::abs(error->shownError(1, 2, 3) - streaming.output_error[2][3].item<double>()) < 1e-6);
  }

  // Self-speculation with each slot (gamma 4, the panel's default): the
  // drafting cache's hatched rows are exactly the rows runSelfSpeculation, run
  // here, left out of it, and within the prompt they are the lab's removed
  // rows (two computations of one policy agree); every generated position's
  // origin adds up to the core's accepted drafts and rounds; the summary
  // table gives alpha; gamma 0 hides the views.
  void selfSpeculationShowsBothCaches() {
    QCOMPARE(panel()->speculationGammaBox()->value(), 4);
    QVERIFY(run({QStringLiteral("h2o:0.25"), QStringLiteral("streaming:0.25")}));
    const SessionSnapshot& snapshot = *window_->context().snapshot();
    SelfSpeculationOptions options;
    options.gamma = 4;
    options.max_new = kSteps;
    options.record = true;
    const SelfSpeculationResult core =
        runSelfSpeculation(*bundle_->model, prompt_, CompressionSpec::evicting(EvictionPolicy::H2O, 0.25), options);
    const CompressionResult lab_h2o = lab(CompressionSpec::evicting(EvictionPolicy::H2O, 0.25));
    SelfSpeculationView* view = panel()->speculationView(0);
    QVERIFY(view->isVisible());
    for (const auto& [layer, head] : {std::pair<int64_t, int64_t>{0, 0}, {snapshot.target.layers - 1, snapshot.target.kv_heads - 1}}) {
      select(layer, head);
      std::vector<int64_t> expected;
      for (int64_t p = 0; p < core.caches.positions; ++p) {
        if (!core.caches.holds(layer, head, p)) expected.push_back(p);
      }
      QVERIFY(!expected.empty());
      const std::vector<int64_t> shown = view->shownRemovedRows();
      QVERIFY2(shown == expected, qPrintable(QStringLiteral("layer %1 head %2: shown %3, core %4")
                                                 .arg(layer).arg(head).arg(list(shown), list(expected))));
      QCOMPARE(shown, removedByCore(lab_h2o, layer, head));
    }
    QCOMPARE(view->shownOutcomes(DraftOutcome::Accepted), core.accepted);
    // The last round's own token is not in the caches yet (they hold every token but the last).
    QCOMPARE(view->shownOutcomes(DraftOutcome::Correction) + view->shownOutcomes(DraftOutcome::Bonus), core.rounds - 1);
    QCOMPARE(view->shownOutcomes(DraftOutcome::Prompt), int64_t(prompt_.size()));  // the last prompt token is in the caches too
    const QString alpha = QString::number(core.alpha, 'f', 2);
    QVERIFY2(view->caption().contains(QStringLiteral("alpha %1").arg(alpha)), qPrintable(view->caption()));
    const int speed_row = panel()->summaryTable()->rowCount() - 1;
    const int alpha_row = speed_row - 1;
    QVERIFY(panel()->summaryTable()->item(alpha_row, 0)->text().startsWith(alpha));
    // The speed beside it: both wall times measured by the run, their ratio in the table and the caption.
    const CompressionRunPtr run = panel()->lastRun();
    QVERIFY(run && run->plain_seconds > 0 && run->results[0].speculation_seconds > 0);
    const double speedup = run->plain_seconds / run->results[0].speculation_seconds;
    QCOMPARE(panel()->summaryTable()->item(speed_row, 0)->text(), QStringLiteral("%1x").arg(speedup, 0, 'f', 2));
    QVERIFY2(view->caption().contains(QStringLiteral("than plain greedy decoding (")) &&
                 view->caption().contains(speedup >= 1 ? QStringLiteral("faster") : QStringLiteral("slower")),
             qPrintable(view->caption()));
    // Slot B too, with its own (streaming) removed rows.
    QVERIFY(panel()->speculationView(1)->isVisible());
    QCOMPARE(panel()->speculationView(1)->shownRemovedRows(),
             removedByCore(lab(CompressionSpec::evicting(EvictionPolicy::Streaming, 0.25)), snapshot.target.layers - 1,
                           snapshot.target.kv_heads - 1));

    panel()->speculationGammaBox()->setValue(0);
    QVERIFY(runNow());
    QVERIFY(!view->isVisible());
    QCOMPARE(panel()->summaryTable()->item(alpha_row, 0)->text(), QStringLiteral("\u2013"));
    QCOMPARE(panel()->summaryTable()->item(speed_row, 0)->text(), QStringLiteral("\u2013"));
    panel()->speculationGammaBox()->setValue(4);
  }

  // Budget 1.0: nothing removed anywhere, KL exactly 0, no output error.
  void fullBudgetRemovesNothing() {
    QVERIFY(run({QStringLiteral("snapkv:1.0")}));
    const SessionSnapshot& snapshot = *window_->context().snapshot();
    for (int64_t layer : {int64_t{0}, snapshot.target.layers - 1}) {
      select(layer, snapshot.target.kv_heads - 1);
      QVERIFY(panel()->slotView(0)->shownRemovedRows().empty());
      QVERIFY(panel()->slotView(0)->shownRemovedScoreRows(0).empty());
    }
    QVERIFY(panel()->slotView(0)->caption().contains(QStringLiteral("0 of")));
    QCOMPARE(panel()->metricsPlot()->curveCount(), 1);
    for (double kl : panel()->metricsPlot()->klValues(0)) QCOMPARE(kl, 0.0);
    QCOMPARE(panel()->errorPlot()->shownError(0, 0, 0), 0.0);
  }

  // Settings the core refuses: its message in the panel, nothing sent, no crash.
  void badSettingsShowTheCoresMessage() {
    CompressionSettingsForm* a = panel()->form(0);
    panel()->form(1)->setEnabledSlot(false);
    const struct {
      const char* shorthand;
      double k_sparsity;
      const char* message;
    } cases[] = {{"h2o:0", 0.5, "--budget must be a fraction of the rows in (0, 1], got 0"},
                 {"streaming:1.5", 0.5, "--budget must be a fraction of the rows in (0, 1], got 1.5"},
                 {"per-channel:0.5", 1.2, "--k-sparsity must be in [0, 1), got 1.2"}};
    for (const auto& c : cases) {
      QVERIFY(a->applyShorthand(QString::fromUtf8(c.shorthand), nullptr));
      a->setSparsity(c.k_sparsity, 0.5);
      QSignalSpy sent(panel(), &CompressionPanel::compressRequested);
      panel()->runButton()->click();
      flush(*window_);
      QCOMPARE(sent.count(), 0);
      QVERIFY2(panel()->statusText().contains(QString::fromUtf8(c.message)), qPrintable(panel()->statusText()));
      QVERIFY2(panel()->slotView(0)->caption().contains(QString::fromUtf8(c.message)), qPrintable(panel()->slotView(0)->caption()));
      QVERIFY(panel()->slotView(0)->shownRemovedRows().empty());
    }
    // A bad B does not stop A: A runs, B says why it did not.
    QVERIFY(a->applyShorthand(QStringLiteral("h2o:0.25"), nullptr));
    CompressionSettingsForm* b = panel()->form(1);
    QVERIFY(b->applyShorthand(QStringLiteral("snapkv:0.5"), nullptr));
    b->setKernel(4);
    QVERIFY(runNow());
    QVERIFY(panel()->statusText().contains(QStringLiteral("--kernel must be odd and >= 1, got 4")));
    QCOMPARE(panel()->metricsPlot()->curveCount(), 1);
    select(0, 0);
    QCOMPARE(panel()->slotView(0)->shownRemovedRows(), removedByCore(lab(CompressionSpec::evicting(EvictionPolicy::H2O, 0.25)), 0, 0));
    b->setKernel(5);
    // A name the core does not know is refused with its list of names.
    QString error;
    QVERIFY(!a->applyShorthand(QStringLiteral("lru:0.5"), &error));
    QVERIFY2(error.contains(QStringLiteral("--policy must be one of")), qPrintable(error));
  }

  // 1024x768 (a laptop, the default layout): every summary cell shows its whole text and
  // slot B's plot is seen whole, not behind a horizontal scroll bar; legend and labels fit.
  void readsAt1024x768() {
    // As --compression arranges it for a small screen: the KV Cache dock above it closed.
    window_->resize(1024, 768);
    window_->dock(QStringLiteral("kvDock"))->hide();
    window_->dock(QStringLiteral("compressionDock"))->raise();
    // The session column as wide as on a desktop's fonts (offscreen's are narrower): about 750 px are left.
    window_->resizeDocks({window_->dock(QStringLiteral("sessionDock"))}, {340}, Qt::Horizontal);
    QVERIFY(run({QStringLiteral("h2o:0.25"), QStringLiteral("streaming:0.25")}));
    settle();
    QVERIFY2(panel()->width() <= 780, qPrintable(QStringLiteral("panel %1 px wide").arg(panel()->width())));
    QTableWidget* table = panel()->summaryTable();
    QVERIFY(table->isVisible());
    const QRect viewport = table->viewport()->rect();
    for (int r = 0; r < table->rowCount(); ++r) {
      for (int c = 0; c < table->columnCount(); ++c) {
        const QTableWidgetItem* item = table->item(r, c);
        QVERIFY(item != nullptr);
        const QRect cell = table->visualItemRect(item);
        const int need = QFontMetrics(item->font()).horizontalAdvance(item->text()) +
                         2 * (table->style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, table) + 1);
        QVERIFY2(need <= cell.width() && viewport.contains(cell),
                 qPrintable(QStringLiteral("row %1 column %2 '%3' needs %4 px, has %5 at x %6 (viewport %7)")
                                .arg(r).arg(c).arg(item->text()).arg(need).arg(cell.width()).arg(cell.x()).arg(viewport.width())));
      }
    }
    // Slot B's plot, clipped by everything it sits in (the results' scroll area): all of it is seen.
    QCustomPlot* b = panel()->slotView(1)->plot();
    QVERIFY(b->isVisible());
    QRect seen(b->mapTo(window_.get(), QPoint(0, 0)), b->size());
    const QRect whole = seen;
    for (QWidget* parent = b->parentWidget(); parent && parent != window_.get(); parent = parent->parentWidget()) {
      seen &= QRect(parent->mapTo(window_.get(), QPoint(0, 0)), parent->size());
    }
    QVERIFY2(seen == whole, qPrintable(QStringLiteral("slot B's plot %1,%2 %3x%4 is seen as %5,%6 %7x%8")
                                           .arg(whole.x()).arg(whole.y()).arg(whole.width()).arg(whole.height())
                                           .arg(seen.x()).arg(seen.y()).arg(seen.width()).arg(seen.height())));
    for (QScrollArea* area : panel()->findChildren<QScrollArea*>()) {
      if (area->isAncestorOf(b)) QVERIFY(!area->horizontalScrollBar()->isVisible());
    }
    // The KL legend inside its plot; the output error's two x labels apart.
    QCustomPlot* metrics = panel()->metricsPlot()->plot();
    QVERIFY2(metrics->legend->outerRect().width() <= metrics->width(),
             qPrintable(QStringLiteral("legend %1 px in %2").arg(metrics->legend->outerRect().width()).arg(metrics->width())));
    QCustomPlot* error = panel()->errorPlot()->plot();
    const auto labelSpan = [](QCPAxisRect* rect) {
      const QCPAxis* x = rect->axis(QCPAxis::atBottom);
      const int width = QFontMetrics(x->labelFont()).horizontalAdvance(x->label());
      return std::pair{rect->rect().center().x() - width / 2, rect->rect().center().x() + width / 2};
    };
    QVERIFY(error->axisRects().size() >= 2);
    QVERIFY2(labelSpan(error->axisRects()[0]).second < labelSpan(error->axisRects()[1]).first,
             qPrintable(error->axisRects()[0]->axis(QCPAxis::atBottom)->label()));
    // The settings folded away to make that room; the button brings them back, the results then stack.
    QVERIFY(panel()->settingsCollapsed());
    auto* toggle = panel()->findChild<QToolButton*>(QStringLiteral("compressionSettingsToggle"));
    QVERIFY(toggle != nullptr && toggle->isVisible());
    toggle->click();
    settle();
    QVERIFY(!panel()->settingsCollapsed());
    QVERIFY(panel()->runButton()->isVisible());
    QVERIFY(panel()->stacked());
    toggle->click();
    settle();
    QVERIFY(panel()->settingsCollapsed());
    window_->dock(QStringLiteral("kvDock"))->show();
    window_->resize(1280, 720);
  }

 private:
  // Lays out and draws now (plots replot on a queue).
  void settle() {
    for (int i = 0; i < 3; ++i) {
      QTest::qWait(50);
      flush(*window_);
      for (QCustomPlot* plot : window_->findChildren<QCustomPlot*>()) {
        if (plot->isVisible()) plot->replot(QCustomPlot::rpImmediateRefresh);
      }
    }
  }

  CompressionPanel* panel() const { return window_->compressionPanel(); }

  CompressionResult lab(const CompressionSpec& spec) const {
    CompressionInput input{prompt_, {}, kSteps};
    return runCompressionLab(*bundle_->model, input, spec);
  }

  // Sets the slots from shorthands (one: B off) and runs them.
  bool run(const QStringList& specs) {
    QString error;
    if (!panel()->applyShorthands(specs, &error)) {
      qWarning() << error;
      return false;
    }
    return runNow();
  }

  bool runNow() {
    const CompressionRunPtr before = panel()->lastRun();
    panel()->runButton()->click();
    if (!QTest::qWaitFor([&] { return panel()->lastRun() != before && !panel()->pending(); }, kTimeout)) return false;
    flush(*window_);
    return true;
  }

  void select(int64_t layer, int64_t head) {
    window_->context().setLayerHead(CacheRole::Target, layer, head);
    flush(*window_);
  }

  void checkShown(const CompressionResult& core, int64_t layer, int64_t head) {
    const std::vector<int64_t> expected = removedByCore(core, layer, head);
    const std::vector<int64_t> shown = panel()->slotView(0)->shownRemovedRows();
    QVERIFY2(shown == expected, qPrintable(QStringLiteral("layer %1 head %2: shown %3, core %4")
                                               .arg(layer).arg(head).arg(list(shown), list(expected))));
    QCOMPARE(panel()->slotView(0)->shownRemovedScoreRows(head), expected);
  }

  std::unique_ptr<MainWindow> window_;
  std::unique_ptr<ModelBundle> bundle_;
  std::vector<int64_t> prompt_;
};

QTEST_MAIN(CompressionPanelTest)
#include "compression_panel_test.moc"
