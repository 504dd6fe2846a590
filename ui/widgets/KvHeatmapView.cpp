#include "ui/widgets/KvHeatmapView.h"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QStackedWidget>
#include <QToolTip>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "ui/context/LayerSummary.h"
#include "ui/context/RowLookup.h"
#include "ui/widgets/BinnedHeatmap.h"
#include "ui/widgets/HoverCellHighlight.h"
#include "ui/widgets/KvHeadGrid.h"
#include "ui/widgets/LayerHeadOverview.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PickerItems.h"
#include "ui/widgets/ShardText.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/RowLabel.h"
#include "ui/widgets/DisplayToken.h"

namespace kvscope::ui {

namespace {
constexpr double kLabelPixels = 11;  // a row this tall (or taller) gets its own label
constexpr double kZoomPerNotch = 0.8;  // one wheel notch shows 80 % of the rows
constexpr int kDragThreshold = 4;    // pixels a press may move and still be a click

// 1, 2, 5, 10, 20, 50, ...: the smallest such step of at least `minimum`.
int niceStep(double minimum) {
  for (int step = 1;; step *= 10) {
    for (int factor : {1, 2, 5}) {
      if (step * factor >= minimum) return step * factor;
    }
  }
}

QCPItemRect* selectionRect(QCustomPlot* plot, double top, double bottom, int cols, bool mine) {
  auto* item = new QCPItemRect(plot);
  item->topLeft->setCoords(StatusColumns::kState, top);
  item->bottomRight->setCoords(cols - 0.5, bottom);
  item->setPen(QPen(Palette::selection(), mine ? 2.5 : 1.5, mine ? Qt::SolidLine : Qt::DotLine));
  item->setBrush(Qt::NoBrush);
  return item;
}
// The attention focus's marks: key rows, the query's own row, ticked rows.
QColor focusKeyColor() { return QColor(0, 140, 230); }
QColor focusQueryColor() { return QColor(200, 0, 200); }
QColor focusTickedColor() { return QColor(220, 40, 40); }

}  // namespace

KvHeatmapView::KvHeatmapView(CacheRole role, QWidget* parent) : QWidget(parent), role_(role) {
  setObjectName(role == CacheRole::Target ? QStringLiteral("targetKv") : QStringLiteral("drafterKv"));
  title_ = new QLabel(role == CacheRole::Target ? tr("<b>Target cache</b>") : tr("<b>Drafter cache</b>"));
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  // Counts of wrong, evicted and focused rows make it long: wrap rather than cut it off in a narrow panel.
  title_->setWordWrap(true);
  buildPlot();
  grid_ = new KvHeadGrid;
  overview_ = new LayerHeadOverview;
  stack_ = new QStackedWidget;
  stack_->addWidget(plot_);
  stack_->addWidget(grid_);
  auto* body = new QHBoxLayout;
  body->setSpacing(2);
  body->addWidget(overview_);
  body->addWidget(stack_, 1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(title_);
  layout->addLayout(buildHeader());
  layout->addLayout(body, 1);
  for (QCustomPlot* source : {plot_, grid_->plot()}) {
    new HoverCellHighlight(source);  // presenter's pointer on the cell under the mouse
    source->setMouseTracking(true);
    source->setFocusPolicy(Qt::WheelFocus);
    connect(source, &QCustomPlot::mouseWheel, this,
            [this, source](QWheelEvent* event) { onWheel(event, axisRectAt(source, event->position())); });
    connect(source, &QCustomPlot::mouseMove, this, &KvHeatmapView::onMouseMove);
    connect(source, &QCustomPlot::mousePress, this, [this, source](QMouseEvent* event) {
      drag_plot_ = source;
      onMousePress(event);
    });
    connect(source, &QCustomPlot::mouseRelease, this, &KvHeatmapView::onMouseRelease);
  }
  summary_timer_ = new QTimer(this);
  summary_timer_->setSingleShot(true);
  summary_timer_->setInterval(0);
  connect(summary_timer_, &QTimer::timeout, this, &KvHeatmapView::updateOverview);
  connect(overview_, &LayerHeadOverview::cellClicked, this,
          [this](int layer, int head) { emit layerHeadPicked(role_, layer, head); });
}

QHBoxLayout* KvHeatmapView::buildHeader() {
  layer_box_ = new QComboBox;
  head_box_ = new QComboBox;
  layer_box_->setToolTip(tr("layer (shared by every panel)"));
  head_box_->setToolTip(tr("kv head (shared by every panel)"));
  // Sized for a few digits, not their widest item: two views side by side
  // must fit a 1280-pixel projector at presenter zoom.
  for (QComboBox* box : {layer_box_, head_box_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(3);
  }
  all_heads_ = new QCheckBox(tr("all"));
  all_heads_->setToolTip(tr("All heads: every kv head of the layer, side by side"));
  fit_action_ = new QAction(tr("Fit"), this);
  fit_action_->setShortcuts({QKeySequence(Qt::Key_F), QKeySequence(Qt::Key_Home)});
  fit_action_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  fit_action_->setToolTip(tr("Show every row (F, Home). Wheel: zoom rows around the pointer; Ctrl+wheel: zoom "
                             "dims; drag: pan"));
  addAction(fit_action_);
  connect(fit_action_, &QAction::triggered, this, &KvHeatmapView::fit);
  fit_button_ = new QToolButton;
  fit_button_->setDefaultAction(fit_action_);
  fit_button_->setAutoRaise(true);
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("head")));
  header->addWidget(head_box_);
  header->addWidget(all_heads_);
  header->addWidget(fit_button_);
  header->addStretch(1);

  connect(all_heads_, &QCheckBox::toggled, this, [this](bool all) {
    stack_->setCurrentIndex(all ? 1 : 0);
    head_box_->setEnabled(!all);
    emit allHeadsToggled();
  });
  const auto picked = [this] {
    emit layerHeadPicked(role_, std::max(0, layer_box_->currentIndex()), std::max(0, head_box_->currentIndex()));
  };
  connect(layer_box_, &QComboBox::currentIndexChanged, this, picked);
  connect(head_box_, &QComboBox::currentIndexChanged, this, picked);
  return header;
}

void KvHeatmapView::buildPlot() {
  plot_ = new QCustomPlot;
  plot_->setObjectName(objectName() + QStringLiteral("Plot"));
  plot_->setMinimumSize(200, 80);
  plot_->axisRect()->setupFullAxesBox(true);
  plot_->yAxis->setRangeReversed(true);
  plot_->xAxis->setLabel(tr("head_dim"));
  plot_->yAxis->setLabel(tr("row: position 'token'"));
  plot_->yAxis->setTickLabelFont(QFont(font().family(), 7));
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map_->setInterpolate(false);
  scale_ = new QCPColorScale(plot_);
  scale_->setType(QCPAxis::atRight);
  scale_->setBarWidth(10);
  plot_->plotLayout()->addElement(0, 1, scale_);
  map_->setColorScale(scale_);
  map_->setGradient(QCPColorGradient::gpPolar);
  auto* margins = new QCPMarginGroup(plot_);
  plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  installPlotExport(plot_, role_ == CacheRole::Target ? QStringLiteral("target-kv") : QStringLiteral("drafter-kv"),
                    [this] { return csv(); });
  // A resize changes how many pixel lines the rows share: bin again once laid out.
  plot_->installEventFilter(this);
}

bool KvHeatmapView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::Resize && snapshot_) {
    QTimer::singleShot(0, this, [this] {
      if (snapshot_ && plotPixels() != pixels_) redraw();
    });
  }
  return QWidget::eventFilter(watched, event);
}

// Rows an eviction policy masked in this kv head: still held (so counted in
// "rows"), no longer read; said in the title so the hatching is not a mystery.
QString KvHeatmapView::maskedText() const {
  const int masked = countMasked();
  if (masked == 0) return {};
  return tr(" &middot; <b>%1 evicted by policy</b> (hatched: held, not read)").arg(masked);
}

QString KvHeatmapView::title() const { return title_->text(); }

void KvHeatmapView::setAllHeads(bool all) { all_heads_->setChecked(all); }
bool KvHeatmapView::allHeads() const { return all_heads_->isChecked(); }

int KvHeatmapView::countMasked() const {
  return static_cast<int>(std::count_if(matrix_.rows.begin(), matrix_.rows.end(),
                                        [](const ViewRow& row) { return row.masked_by >= 0; }));
}

QString KvHeatmapView::evictionText(const ViewRow& row) const {
  const auto& events = snapshot_->events.events();
  if (row.masked_by < 0 || row.masked_by >= static_cast<int64_t>(events.size())) return {};
  const CacheEvent& e = events[static_cast<size_t>(row.masked_by)];
  for (const MaskedRow& m : e.masked) {
    if (m.entry != row.entry || m.layer != layer_ || m.kv_head != head_) continue;
    return tr(" \u00b7 EVICTED in kv head %1 by policy %2 at round %3 (%4), score %5")
        .arg(snapshot_->geometry(role_).modelHead(head_))
        .arg(QString::fromStdString(e.policy))
        .arg(e.round)
        .arg(QString::fromUtf8(phaseName(e.phase)))
        .arg(m.score, 0, 'g', 4);
  }
  return {};
}

int KvHeatmapView::countStatus(RowStatus status) const {
  return static_cast<int>(std::count_if(matrix_.rows.begin(), matrix_.rows.end(),
                                        [&](const ViewRow& row) { return row.status == status; }));
}

int KvHeatmapView::countState(RowState state) const {
  if (state == RowState::Missing) return static_cast<int>(missing_.size());
  return static_cast<int>(std::count_if(matrix_.rows.begin(), matrix_.rows.end(),
                                        [&](const ViewRow& row) { return row.state == state; }));
}

void KvHeatmapView::updateSelectors(const SessionSnapshot* snapshot, const Cursor& cursor) {
  const CacheGeometry geometry = snapshot ? snapshot->geometry(role_) : CacheGeometry{};
  const int layers = static_cast<int>(geometry.layers), heads = static_cast<int>(geometry.kv_heads);
  layer_ = static_cast<int>(std::clamp<int64_t>(cursor.layer, 0, std::max(layers - 1, 0)));
  head_ = static_cast<int>(std::clamp<int64_t>(cursor.head, 0, std::max(heads - 1, 0)));
  const QSignalBlocker block_layers(layer_box_), block_heads(head_box_);
  syncPickerItems(layer_box_, layers);
  // A rank's heads as the model numbers them (CacheGeometry::first_kv_head).
  syncPickerItems(head_box_, heads, [&geometry](int h) { return QString::number(geometry.modelHead(h)); });
  layer_box_->setCurrentIndex(layers > 0 ? layer_ : -1);
  head_box_->setCurrentIndex(heads > 0 ? head_ : -1);
}

void KvHeatmapView::show(std::shared_ptr<const SessionSnapshot> shown, const Cursor& cursor, bool values,
                         const ColorRange& range) {

  const Cursor previous = cursor_;
  snapshot_ = std::move(shown);
  cursor_ = cursor;
  const SessionSnapshot* snapshot = snapshot_.get();
  values_ = values;
  updateSelectors(snapshot, cursor);
  missing_.clear();
  if (!snapshot || !cursor.valid() || !snapshot->geometry(role_).present) {
    matrix_ = CacheMatrix{};
    binning_ = RowBinning{};
    marks_.clear();
    plot_->clearItems();
    map_->data()->clear();
    overview_->clear();
    summary_snapshot_ = nullptr;
    title_->setText(role_ == CacheRole::Target ? tr("<b>Target cache</b>")
                                               : tr("<b>Drafter cache</b> (no model drafter)"));
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  matrix_ = cacheMatrix(*snapshot, role_, cursor.moment(), layer_, head_, values);
  for (const RowVerdict& v : rowVerdicts(*snapshot, role_, layer_, cursor.moment())) {
    if (v.state == RowState::Missing) missing_.push_back(v);
  }
  updateFocusRows();
  updateTitle();
  setColorRange(range);
  overview_->select(layer_, head_);
  summary_timer_->start();  // after the heatmap is drawn: a 32-layer summary costs ~10 ms
  viewport_.setExtent(rowCount(), StatusColumns::kLeftEdge, std::max<double>(static_cast<double>(matrix_.cols), 1) - 0.5);
  // A selection made elsewhere scrolls into view; a new step does not undo the user's pan.
  const bool selection_moved = previous.cache != cursor.cache || previous.entry != cursor.entry ||
                               previous.row != cursor.row || previous.position != cursor.position;
  if (selection_moved) followCursor(cursor);
  if (allHeads()) grid_->show(snapshot, cursor, role_, layer_, values, range, viewport_);
  redraw();
}

void KvHeatmapView::updateTitle() {
  const int bad = rowCount() - countState(RowState::Ok) + static_cast<int>(missing_.size());
  title_->setText(QStringLiteral("<b>%1</b> %2 &middot; %3 rows, %4 new, %5 removed%6")
                      .arg(role_ == CacheRole::Target ? tr("Target") : tr("Drafter"))
                      .arg(values_ ? QStringLiteral("V") : QStringLiteral("K"))
                      .arg(rowCount() - countStatus(RowStatus::Pruned) - countStatus(RowStatus::WrittenPruned))
                      .arg(countStatus(RowStatus::Written) + countStatus(RowStatus::WrittenPruned))
                      .arg(countStatus(RowStatus::Pruned) + countStatus(RowStatus::WrittenPruned))
                      .arg(bad > 0 ? tr(" &middot; <b style='color:#c00'>%1 wrong</b>").arg(bad) : QString()) +
                  maskedText() +
                  (focus_key_rows_.empty()
                       ? QString()
                       : tr(" &middot; <span style='color:%1'>query %2 reads %3 of its %4 rows here</span>")
                             .arg(focusKeyColor().name())
                             .arg(focus_.query_position)
                             .arg(focus_key_rows_.size())
                             .arg(focus_.key_positions.size())));
  // The own row of a query not yet fed is written by its own forward: not in the cache yet.
  title_->setToolTip(focus_key_rows_.empty()
                         ? QString()
                         : tr("Outlined: the cache rows the Attention Step by Step query (position %1) reads at this "
                              "layer and kv head; its own row in magenta, rows ticked in the what-if box dashed red.\n"
                              "A query not yet fed to the model reads its own row from its own forward, not from "
                              "the cache.")
                               .arg(focus_.query_position));
}

void KvHeatmapView::setAttentionFocus(const AttentionFocus& focus) {
  if (focus == focus_) return;
  focus_ = focus;
  if (!snapshot_ || matrix_.cols == 0) return;  // marked at the next show()
  updateFocusRows();
  updateTitle();
  redraw();
}

void KvHeatmapView::updateFocusRows() {
  focus_key_rows_.clear();
  focus_query_rows_.clear();
  focus_ticked_rows_.clear();
  if (!snapshot_ || !focus_.active || role_ != CacheRole::Target || focus_.layer != layer_ || focus_.kv_head != head_) {
    return;
  }
  auto flags = [](const std::vector<int64_t>& positions) {  // position -> marked
    std::vector<uint8_t> out;
    for (int64_t p : positions) {
      if (p < 0) continue;
      if (static_cast<size_t>(p) >= out.size()) out.resize(static_cast<size_t>(p) + 1, 0);
      out[static_cast<size_t>(p)] = 1;
    }
    return out;
  };
  const auto keys = flags(focus_.key_positions), ticked = flags(focus_.ticked_positions);
  auto in = [](const std::vector<uint8_t>& set, int64_t p) {
    return p >= 0 && static_cast<size_t>(p) < set.size() && set[static_cast<size_t>(p)] != 0;
  };
  for (int r = 0; r < rowCount(); ++r) {
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    if (row.physical_row < 0) continue;  // removed this round: no longer read
    const int64_t position = snapshot_->entries[static_cast<size_t>(row.entry)].position;
    if (!in(keys, position)) continue;
    focus_key_rows_.push_back(r);
    if (position == focus_.query_position) focus_query_rows_.push_back(r);
    if (in(ticked, position)) focus_ticked_rows_.push_back(r);
  }
}

void KvHeatmapView::drawFocus() {
  // One outline per run of lines holding key rows (an aggregated line holding
  // one is outlined); the query's row and the ticked rows over it.
  const int cols = static_cast<int>(matrix_.cols);
  const int end = std::min(rowCount(), binning_.binEnd(binning_.bins - 1));
  auto outline = [&](const std::vector<int>& rows, const QPen& pen, double inset) {
    int run_first = -1, run_last = -1;
    auto flush = [&] {
      if (run_first < 0) return;
      auto* item = new QCPItemRect(plot_);
      item->topLeft->setCoords(StatusColumns::kState + inset, binning_.binFirst(run_first) - 0.5 + inset);
      item->bottomRight->setCoords(cols - 0.5 - inset, binning_.binEnd(run_last) - 0.5 - inset);
      item->setPen(pen);
      item->setBrush(Qt::NoBrush);
      item->setSelectable(false);
    };
    for (int r : rows) {
      if (r < binning_.first_row || r >= end) continue;
      const int bin = binning_.binOf(r);
      if (run_last >= 0 && (bin == run_last || bin == run_last + 1)) {
        run_last = bin;
        continue;
      }
      flush();
      run_first = run_last = bin;
    }
    flush();
  };
  // Inset a little so that an outline along the plot's edge is not clipped.
  outline(focus_key_rows_, QPen(focusKeyColor(), 2.5), 0.1);
  outline(focus_ticked_rows_, QPen(focusTickedColor(), 2.0, Qt::DashLine), 0.25);
  outline(focus_query_rows_, QPen(focusQueryColor(), 2.5), 0.25);
}

void KvHeatmapView::updateOverview() {
  if (!snapshot_ || !cursor_.valid() || !snapshot_->geometry(role_).present) return;
  // Every layer's rows are replayed for the summary: only when the moment or the data changed.
  const Moment moment = cursor_.moment();
  if (summary_snapshot_ == snapshot_.get() && summary_moment_.round == moment.round &&
      summary_moment_.phase == moment.phase && summary_values_ == values_) {
    return;
  }
  summary_snapshot_ = snapshot_.get();
  summary_moment_ = moment;
  summary_values_ = values_;
  overview_->show(layerSummary(*snapshot_, role_, moment, values_), layer_, head_, values_);
}

void KvHeatmapView::setColorRange(const ColorRange& range) {
  // From every row, not the ones in view: colours stay put while zooming and panning.
  if (range.autofit) {
    const double extent = std::max({std::fabs(static_cast<double>(matrix_.min)), std::fabs(static_cast<double>(matrix_.max)), 1e-6});
    shown_lower_ = -extent;
    shown_upper_ = extent;
  } else {
    shown_lower_ = range.lower;
    shown_upper_ = std::max(range.upper, range.lower + 1e-9);
  }
  map_->setDataRange(QCPRange(shown_lower_, shown_upper_));
}

int KvHeatmapView::selectedRow(const Cursor& cursor) const {
  if (!snapshot_) return -1;
  for (int r = 0; r < rowCount(); ++r) {
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    const bool selected = cursor.cache == role_
                              ? row.entry == cursor.entry
                              : snapshot_->entries[static_cast<size_t>(row.entry)].position == cursor.position;
    if (selected && row.entry >= 0) return r;
  }
  if (cursor.cache == role_ && cursor.entry < 0 && cursor.row >= 0 && cursor.row < rowCount()) {
    return static_cast<int>(cursor.row);
  }
  return -1;
}

void KvHeatmapView::followCursor(const Cursor& cursor) {
  const int row = selectedRow(cursor);
  if (row >= 0) viewport_.showRow(row);
}

void KvHeatmapView::fit() {
  viewport_.fit();
  redraw();
}

void KvHeatmapView::zoomRows(double factor, double anchor_row) {
  viewport_.zoomRows(factor, anchor_row);
  redraw();
}

void KvHeatmapView::panRows(double rows) {
  viewport_.panRows(rows);
  redraw();
}

void KvHeatmapView::setVisibleRows(double lower, double upper) {
  viewport_.setRows(lower, upper);
  redraw();
}

RowState KvHeatmapView::shownState(int row) const {
  const int bin = binning_.binOf(row);
  return bin >= 0 ? marks_[static_cast<size_t>(bin)].state : RowState::Ok;
}

int KvHeatmapView::plotPixels() {
  // The axis rect's height as the next replot will lay it out.
  QCPLayout* layout = plot_->plotLayout();
  layout->setOuterRect(plot_->rect());
  for (auto phase : {QCPLayoutElement::upPreparation, QCPLayoutElement::upMargins, QCPLayoutElement::upLayout}) {
    layout->update(phase);
  }
  return std::max(1, plot_->axisRect()->height());
}

void KvHeatmapView::redraw() {
  if (!snapshot_ || matrix_.cols == 0) return;
  const int cols = static_cast<int>(matrix_.cols);
  pixels_ = plotPixels();
  binning_ = binRows(rowCount(), viewport_.rows().lower, viewport_.rows().upper, pixels_);
  marks_ = binMarks(matrix_, binning_);
  fillBinnedMap(map_, matrix_, binning_);
  plot_->clearItems();
  drawBinMarks(plot_, plot_->axisRect(), binning_, marks_, cols);
  for (const RowVerdict& v : missing_) {  // a dashed line where the missing row belongs
    auto* line = new QCPItemLine(plot_);
    line->start->setCoords(StatusColumns::kState, v.row - 0.5);
    line->end->setCoords(cols - 0.5, v.row - 0.5);
    line->setPen(QPen(Palette::rowState(RowState::Missing), 2.5, Qt::DashLine));
  }
  drawSelection(*snapshot_);
  drawFocus();
  drawLabels(*snapshot_);
  plot_->xAxis->setRange(viewport_.cols().lower, viewport_.cols().upper);
  plot_->yAxis->setRange(viewport_.rows().lower, viewport_.rows().upper);
  if (allHeads()) grid_->setViewport(viewport_);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString KvHeatmapView::rangeText() const {
  // Which rows are in view and, when several share a pixel line, how they are combined.
  const int last_row = std::max(rowCount() - 1, 0);
  const int first = std::clamp(static_cast<int>(std::ceil(viewport_.rows().lower)), 0, last_row);
  const int last = std::clamp(static_cast<int>(std::floor(viewport_.rows().upper)), first, last_row);
  QString text = viewport_.rows().size() >= viewport_.fullRows().size()
                     ? tr("all %1 rows").arg(rowCount())
                     : tr("rows %1\u2013%2 of %3").arg(first).arg(last).arg(rowCount());
  if (binning_.aggregated()) {
    text += tr(" \u00b7 %1 per line, largest |%2|").arg(binning_.rows_per_bin).arg(values_ ? "V" : "K");
  }
  return text;
}

void KvHeatmapView::drawSelection(const SessionSnapshot& snapshot) {
  // This cache's selected row; in the other cache, rows for the selected position.
  // One outline per line drawn: an aggregated line holding the row is outlined.
  const int cols = static_cast<int>(matrix_.cols);
  const bool mine = cursor_.cache == role_;
  int last_bin = -1;
  for (int r = binning_.first_row; r < std::min(rowCount(), binning_.binEnd(binning_.bins - 1)); ++r) {
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    const bool selected = mine ? row.entry == cursor_.entry
                               : snapshot.entries[static_cast<size_t>(row.entry)].position == cursor_.position;
    const int bin = binning_.binOf(r);
    if (!selected || bin == last_bin) continue;
    last_bin = bin;
    selectionRect(plot_, binning_.binFirst(bin) - 0.5, binning_.binEnd(bin) - 0.5, cols, mine);
  }
  if (mine && cursor_.entry < 0 && cursor_.row >= 0) {
    selectionRect(plot_, cursor_.row - 0.5, cursor_.row + 0.5, cols, true);
  }
}

void KvHeatmapView::drawLabels(const SessionSnapshot& snapshot) {
  const double pixels_per_row = pixels_ / std::max(viewport_.rows().size(), 1e-9);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  if (pixels_per_row >= kLabelPixels) {  // every row in view by identity
    for (int r = binning_.first_row; r < std::min(rowCount(), binning_.binEnd(binning_.bins - 1)); ++r) {
      ticker->addTick(r, rowLabel(snapshot, matrix_.rows[static_cast<size_t>(r)]));
    }
    plot_->yAxis->setTicker(ticker);
    plot_->yAxis->setLabel(rangeText() + tr(": position 'token'"));
  } else {
    drawBinLabels(snapshot, pixels_);
  }
  auto dims = QSharedPointer<QCPAxisTickerText>::create();  // integer dims only, none under the status columns
  const AxisSpan& cols = viewport_.cols();
  // At most 8 ticks, fewer when the labels would touch (a narrow dock, or
  // presenter zoom's larger font): one label's width per tick and a gap.
  const int label_px = QFontMetrics(plot_->xAxis->tickLabelFont()).horizontalAdvance(QStringLiteral("0000"));
  const int fitting = std::max(2, plot_->axisRect()->width() / std::max(label_px, 1));
  const int dim_step = niceStep(std::max(1.0, (cols.upper - std::max(cols.lower, -0.5)) / std::min(8, fitting)));
  for (int c = 0; c < matrix_.cols; c += dim_step) {
    if (c >= cols.lower && c <= cols.upper) dims->addTick(c, QString::number(c));
  }
  plot_->xAxis->setTicker(dims);
}

void KvHeatmapView::drawBinLabels(const SessionSnapshot& snapshot, int pixels) {
  // Too many rows to name each: rows that break the bookkeeping are named
  // (one per label's height), other ticks every `step` rows fill the gaps.
  const double pixels_per_row = pixels / std::max(viewport_.rows().size(), 1e-9);
  const double min_gap = kLabelPixels / pixels_per_row;  // in rows
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  std::vector<double> named;
  for (int b = 0; b < binning_.bins; ++b) {
    if (marks_[static_cast<size_t>(b)].bad == 0) continue;
    for (int r = binning_.binFirst(b); r < binning_.binEnd(b); ++r) {
      const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
      if (row.state == RowState::Ok) continue;
      if (named.empty() || r - named.back() >= min_gap) {
        ticker->addTick(r, rowLabel(snapshot, row));
        named.push_back(r);
      }
      break;
    }
  }
  const int step = niceStep(1.6 * min_gap);
  for (int r = (binning_.first_row + step - 1) / step * step; r < rowCount(); r += step) {
    const bool crowded = std::any_of(named.begin(), named.end(), [&](double n) { return std::fabs(n - r) < min_gap; });
    if (!crowded) ticker->addTick(r, QString::number(r));
  }
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setLabel(rangeText());
}

QString KvHeatmapView::csv() const {
  QString out = QStringLiteral("row,position,rope_position,token_id,token,status,state,born_round,died_round,reason");
  for (int64_t c = 0; c < matrix_.cols; ++c) out += QStringLiteral(",%1%2").arg(values_ ? QStringLiteral("v") : QStringLiteral("k")).arg(c);
  out += QLatin1Char('\n');
  if (!snapshot_) return out;
  for (size_t r = 0; r < matrix_.rows.size(); ++r) {
    const ViewRow& row = matrix_.rows[r];
    const LedgerEntry& entry = snapshot_->entries[static_cast<size_t>(row.entry)];
    QString token = QString::fromStdString(snapshot_->tokenText(entry.token));
    token.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    out += QStringLiteral("%1,%2,%3,%4,\"%5\",%6,%7,%8,%9,%10")
               .arg(row.physical_row)
               .arg(entry.position)
               .arg(entry.rope_position)
               .arg(entry.token)
               .arg(token)
               .arg(QString::fromUtf8(rowStatusName(row.status)))
               .arg(QString::fromUtf8(rowStateName(row.state)))
               .arg(entry.born_round)
               .arg(entry.died_round)
               .arg(QString::fromUtf8(deathReasonName(entry.reason)));
    for (int64_t c = 0; c < matrix_.cols; ++c) {
      out += QLatin1Char(',') + QString::number(static_cast<double>(matrix_.values[r * static_cast<size_t>(matrix_.cols) + static_cast<size_t>(c)]), 'g', 7);
    }
    out += QLatin1Char('\n');
  }
  return out;
}

int KvHeatmapView::rowAt(double y) const {
  const int row = static_cast<int>(std::lround(y));
  return row >= 0 && row < rowCount() ? row : -1;
}

QCPAxisRect* KvHeatmapView::axisRectAt(QCustomPlot* source, const QPointF& pos) const {
  QCPAxisRect* rect = source->axisRectAt(pos);
  return rect ? rect : source->axisRect();
}

QString KvHeatmapView::hoverFor(int r, int col) const {
  const QString kv = values_ ? QStringLiteral("V") : QStringLiteral("K");
  const int bin = binning_.binOf(r);
  if (binning_.aggregated() && bin >= 0) {  // one line, several rows: say which and how they were combined
    const BinMarks& marks = marks_[static_cast<size_t>(bin)];
    QString text = tr("%1 rows %2\u2013%3 (%4 rows on this line; colour: the value of largest |%5| per dim)")
                       .arg(role_ == CacheRole::Target ? tr("target") : tr("drafter"))
                       .arg(binning_.binFirst(bin))
                       .arg(binning_.binEnd(bin) - 1)
                       .arg(binning_.binCount(bin))
                       .arg(kv);
    if (marks.bad > 0) {
      text += tr(" \u00b7 %1 %2").arg(marks.bad).arg(Palette::rowStateLabel(marks.state));
    }
    if (marks.masked > 0) text += tr(" \u00b7 %1 evicted by a policy in this kv head").arg(marks.masked);
    if (col >= 0 && col < matrix_.cols) {
      const std::vector<float> line = binValues(matrix_, RowBinning{binning_.rows, binning_.binFirst(bin), binning_.rows_per_bin, 1});
      text += tr(" \u00b7 dim %1: %2 = %3").arg(col).arg(kv).arg(static_cast<double>(line[static_cast<size_t>(col)]), 0, 'f', 4);
    }
    return text + tr(" \u00b7 wheel to zoom in");
  }
  const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
  const LedgerEntry& entry = snapshot_->entries[static_cast<size_t>(row.entry)];
  QString text = QStringLiteral("%1 %2 \u00b7 written for position %3 (rotary %4) '%5' \u00b7 %6")
                     .arg(role_ == CacheRole::Target ? tr("target") : tr("drafter"))
                     .arg(row.physical_row >= 0 ? tr("row %1").arg(row.physical_row) : tr("removed row"))
                     .arg(entry.position)
                     .arg(entry.rope_position)
                     .arg(displayToken(snapshot_->tokenText(entry.token)))
                     .arg(QString::fromUtf8(rowStatusName(row.status)));
  if (row.state != RowState::Ok) text += tr(" \u00b7 verdict: %1").arg(Palette::rowStateLabel(row.state));
  if (snapshot_->rank >= 0) {  // a rank's cache: which of the model's heads this is
    text += tr(" \u00b7 kv head %1 (%2)").arg(snapshot_->geometry(role_).modelHead(head_)).arg(shardText(*snapshot_));
  }
  text += evictionText(row);
  if (col >= 0 && col < matrix_.cols) {
    text += QStringLiteral(" \u00b7 dim %1: %2 = %3")
                .arg(col)
                .arg(kv)
                .arg(static_cast<double>(matrix_.values[static_cast<size_t>(r * matrix_.cols + col)]), 0, 'f', 4);
  }
  return text;
}

void KvHeatmapView::onMouseMove(QMouseEvent* event) {
  if (!snapshot_ || rowCount() == 0) return;
  if (drag_rect_ && (event->buttons() & Qt::LeftButton)) {
    const QPointF moved = event->position() - drag_from_;
    dragging_ = dragging_ || std::abs(moved.x()) + std::abs(moved.y()) > kDragThreshold;
    if (!dragging_) return;
    // Content follows the pointer: rows grow downwards, dims to the right.
    const double rows_per_pixel = drag_rows_.size() / std::max(drag_rect_->height(), 1);
    const double cols_per_pixel = drag_cols_.size() / std::max(drag_rect_->width(), 1);
    viewport_.panRows(drag_rows_.lower - moved.y() * rows_per_pixel - viewport_.rows().lower);
    viewport_.panCols(drag_cols_.lower - moved.x() * cols_per_pixel - viewport_.cols().lower);
    redraw();
    return;
  }
  if (sender() != plot_) return;
  const int r = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  const int col = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
  const QString text = r < 0 ? QString() : hoverFor(r, col);
  // Beside the pointer, where the eye is: in the status bar a row's history
  // and its eviction ran into the cursor's own text.
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint() + QPoint(16, 16), text, plot_);
  }
  emit hoverText(text);
}

void KvHeatmapView::onMousePress(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || !drag_plot_) return;
  drag_rect_ = axisRectAt(drag_plot_, event->position());
  drag_from_ = event->position();
  drag_rows_ = viewport_.rows();
  drag_cols_ = viewport_.cols();
  dragging_ = false;
}

void KvHeatmapView::onMouseRelease(QMouseEvent* event) {
  const bool click = drag_rect_ && !dragging_ && drag_plot_ == plot_ && event->button() == Qt::LeftButton;
  drag_rect_ = nullptr;
  drag_plot_ = nullptr;
  dragging_ = false;
  if (!click) return;
  const int row = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  if (row < 0) return;
  // On an aggregated line the marked row is what the user aims at.
  const int bin = binning_.binOf(row);
  int chosen = row;
  for (int r = binning_.binFirst(bin); bin >= 0 && r < binning_.binEnd(bin); ++r) {
    if (matrix_.rows[static_cast<size_t>(r)].state != RowState::Ok) {
      chosen = r;
      break;
    }
  }
  emit entryClicked(matrix_.rows[static_cast<size_t>(chosen)].entry);
}

void KvHeatmapView::onWheel(QWheelEvent* event, QCPAxisRect* rect) {
  const double notches = event->angleDelta().y() / 120.0;
  if (!snapshot_ || rowCount() == 0 || notches == 0 || !rect) return;
  const double factor = std::pow(kZoomPerNotch, notches);  // away from the user: zoom in
  if (event->modifiers() & Qt::ControlModifier) {
    viewport_.zoomCols(factor, rect->axis(QCPAxis::atBottom)->pixelToCoord(event->position().x()));
  } else {
    viewport_.zoomRows(factor, rect->axis(QCPAxis::atLeft)->pixelToCoord(event->position().y()));
  }
  event->accept();
  redraw();
}

}  // namespace kvscope::ui
