#include "ui/widgets/KvHeatmapView.h"

#include <QCheckBox>
#include <QComboBox>
#include <QStackedWidget>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/KvHeadGrid.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {
constexpr double kStatusLeft = -2.7;   // the status columns, left of dim 0
constexpr double kStatusMid = -1.8;
constexpr double kStatusRight = -0.9;
}  // namespace

KvHeatmapView::KvHeatmapView(CacheRole role, QWidget* parent) : QWidget(parent), role_(role) {
  setObjectName(role == CacheRole::Target ? QStringLiteral("targetKv") : QStringLiteral("drafterKv"));
  title_ = new QLabel(role == CacheRole::Target ? tr("<b>Target cache</b>") : tr("<b>Drafter cache</b>"));
  layer_box_ = new QComboBox;
  head_box_ = new QComboBox;
  layer_box_->setToolTip(tr("layer"));
  head_box_->setToolTip(tr("kv head"));
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("kv head")));
  header->addWidget(head_box_);
  all_heads_ = new QCheckBox(tr("all heads"));
  all_heads_->setToolTip(tr("Small multiples: every kv head of the layer"));
  header->addWidget(all_heads_);
  header->addStretch(1);

  plot_ = new QCustomPlot;
  plot_->setObjectName(objectName() + QStringLiteral("Plot"));
  plot_->setMinimumSize(200, 130);
  plot_->axisRect()->setupFullAxesBox(true);
  plot_->yAxis->setRangeReversed(true);
  plot_->xAxis->setLabel(tr("head_dim"));
  plot_->yAxis->setLabel(tr("position"));
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
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &KvHeatmapView::onMouseMove);
  connect(plot_, &QCustomPlot::mousePress, this, &KvHeatmapView::onMousePress);
  installPlotExport(plot_, role == CacheRole::Target ? QStringLiteral("target-kv") : QStringLiteral("drafter-kv"),
                    [this] { return csv(); });

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(title_);
  layout->addLayout(header);
  grid_ = new KvHeadGrid;
  stack_ = new QStackedWidget;
  stack_->addWidget(plot_);
  stack_->addWidget(grid_);
  layout->addWidget(stack_, 1);
  connect(all_heads_, &QCheckBox::toggled, this, [this](bool all) {
    stack_->setCurrentIndex(all ? 1 : 0);
    head_box_->setEnabled(!all);
    emit selectorsChanged();
  });
  connect(layer_box_, &QComboBox::currentIndexChanged, this, &KvHeatmapView::selectorsChanged);
  connect(head_box_, &QComboBox::currentIndexChanged, this, &KvHeatmapView::selectorsChanged);
}

void KvHeatmapView::setAllHeads(bool all) { all_heads_->setChecked(all); }
bool KvHeatmapView::allHeads() const { return all_heads_->isChecked(); }

int KvHeatmapView::layer() const { return std::max(0, layer_box_->currentIndex()); }
int KvHeatmapView::head() const { return std::max(0, head_box_->currentIndex()); }

void KvHeatmapView::setLayerHead(int layer, int head) {
  layer_box_->setCurrentIndex(layer);
  head_box_->setCurrentIndex(head);
}

int KvHeatmapView::countStatus(RowStatus status) const {
  return static_cast<int>(std::count(matrix_.status.begin(), matrix_.status.end(), status));
}

void KvHeatmapView::updateSelectors(const SessionSnapshot* snapshot) {
  const CacheGeometry geometry = snapshot ? (role_ == CacheRole::Target ? snapshot->target : snapshot->drafter)
                                          : CacheGeometry{};
  const int layers = static_cast<int>(geometry.layers), heads = static_cast<int>(geometry.kv_heads);
  if (layers == layers_shown_ && heads == heads_shown_) return;
  const QSignalBlocker block_layers(layer_box_), block_heads(head_box_);
  const int old_layer = layer_box_->currentIndex(), old_head = head_box_->currentIndex();
  layer_box_->clear();
  head_box_->clear();
  for (int i = 0; i < layers; ++i) layer_box_->addItem(QString::number(i));
  for (int i = 0; i < heads; ++i) head_box_->addItem(QString::number(i));
  layer_box_->setCurrentIndex(old_layer >= 0 && old_layer < layers ? old_layer : 0);
  head_box_->setCurrentIndex(old_head >= 0 && old_head < heads ? old_head : 0);
  layers_shown_ = layers;
  heads_shown_ = heads;
}

void KvHeatmapView::show(std::shared_ptr<const SessionSnapshot> shown, const Cursor& cursor, bool values,
                         const ColorRange& range) {
  snapshot_ = std::move(shown);
  const SessionSnapshot* snapshot = snapshot_.get();
  values_ = values;
  updateSelectors(snapshot);
  plot_->clearItems();
  const CacheGeometry geometry = snapshot ? (role_ == CacheRole::Target ? snapshot->target : snapshot->drafter)
                                          : CacheGeometry{};
  if (!snapshot || !cursor.valid() || !geometry.present) {
    matrix_ = CacheMatrix{};
    map_->data()->clear();
    title_->setText(role_ == CacheRole::Target ? tr("<b>Target cache</b>")
                                               : tr("<b>Drafter cache</b> (no model drafter)"));
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  if (allHeads()) grid_->show(snapshot, cursor, role_, layer(), values, range);
  matrix_ = cacheMatrix(*snapshot, role_, cursor.round, cursor.phase, layer(), head(), values);
  const int rows = rowCount();
  const int cols = static_cast<int>(matrix_.cols);
  title_->setText(QStringLiteral("<b>%1 cache</b> %2 &middot; %3 rows (%4 new, %5 pruned)")
                      .arg(role_ == CacheRole::Target ? tr("Target") : tr("Drafter"))
                      .arg(values ? QStringLiteral("V") : QStringLiteral("K"))
                      .arg(rows)
                      .arg(countStatus(RowStatus::Written) + countStatus(RowStatus::WrittenPruned))
                      .arg(countStatus(RowStatus::Pruned) + countStatus(RowStatus::WrittenPruned)));

  QCPColorMapData* data = map_->data();
  data->setSize(std::max(cols, 1), std::max(rows, 1));
  data->setRange(QCPRange(0, std::max(cols - 1, 1)), QCPRange(0, std::max(rows - 1, 1)));
  if (rows == 0) data->fill(std::nan(""));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) data->setCell(c, r, matrix_.values[static_cast<size_t>(r * cols + c)]);
  }
  if (range.autofit) {
    const double extent = std::max({std::fabs(static_cast<double>(matrix_.min)), std::fabs(static_cast<double>(matrix_.max)), 1e-6});
    shown_lower_ = -extent;
    shown_upper_ = extent;
  } else {
    shown_lower_ = range.lower;
    shown_upper_ = std::max(range.upper, range.lower + 1e-9);
  }
  map_->setDataRange(QCPRange(shown_lower_, shown_upper_));

  // Status columns left of the heatmap: "written this round" (green) and
  // "pruned this round" (red); a pruned row is also faded and outlined in red.
  for (int r = 0; r < rows; ++r) {
    const RowStatus status = matrix_.status[static_cast<size_t>(r)];
    const bool written = status == RowStatus::Written || status == RowStatus::WrittenPruned;
    const bool pruned = status == RowStatus::Pruned || status == RowStatus::WrittenPruned;
    const auto mark = [&](double left, double right, const QColor& color) {
      auto* rect = new QCPItemRect(plot_);
      rect->topLeft->setCoords(left, r - 0.5);
      rect->bottomRight->setCoords(right, r + 0.5);
      rect->setPen(Qt::NoPen);
      rect->setBrush(color);
    };
    if (written) mark(kStatusLeft, kStatusMid, Palette::written());
    if (pruned) {
      mark(kStatusMid, kStatusRight, Palette::pruned());
      auto* fade = new QCPItemRect(plot_);
      fade->topLeft->setCoords(-0.5, r - 0.5);
      fade->bottomRight->setCoords(cols - 0.5, r + 0.5);
      fade->setPen(QPen(Palette::pruned(), 1));
      fade->setBrush(QColor(255, 255, 255, 150));
    }
  }
  // The selected position.
  for (int r = 0; r < rows; ++r) {
    const LedgerEntry& entry = snapshot->entries[static_cast<size_t>(matrix_.entry_indices[static_cast<size_t>(r)])];
    if (entry.position != cursor.position) continue;
    auto* selection = new QCPItemRect(plot_);
    selection->topLeft->setCoords(kStatusLeft, r - 0.5);
    selection->bottomRight->setCoords(cols - 0.5, r + 0.5);
    selection->setPen(QPen(Palette::selection(), 2));
    selection->setBrush(Qt::NoBrush);
  }

  // Row labels: position and token, thinned out to ~32 labels.
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const int label_rows = std::max(4, plot_->axisRect()->height() / 13);
  const int step = std::max(1, (rows + label_rows - 1) / label_rows);
  for (int r = 0; r < rows; r += step) {
    const LedgerEntry& entry = snapshot->entries[static_cast<size_t>(matrix_.entry_indices[static_cast<size_t>(r)])];
    QString token = displayToken(snapshot->tokenText(entry.token));
    if (token.size() > 8) token = token.left(7) + QStringLiteral("\u2026");
    ticker->addTick(r, QStringLiteral("%1 %2").arg(entry.position).arg(token));
  }
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setTickLabelFont(QFont(font().family(), 7));
  auto dims = QSharedPointer<QCPAxisTickerText>::create();  // integer dims only, none under the status columns
  const int dim_step = std::max(1, cols / 8);
  for (int c = 0; c < cols; c += dim_step) dims->addTick(c, QString::number(c));
  plot_->xAxis->setTicker(dims);
  plot_->xAxis->setRange(kStatusLeft - 0.2, std::max(cols, 1) - 0.5);
  plot_->yAxis->setRange(-0.5, std::max(rows, 1) - 0.5);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString KvHeatmapView::csv() const {
  QString out = QStringLiteral("position,token_id,token,status,born_round,died_round,reason");
  for (int64_t c = 0; c < matrix_.cols; ++c) out += QStringLiteral(",%1%2").arg(values_ ? QStringLiteral("v") : QStringLiteral("k")).arg(c);
  out += QLatin1Char('\n');
  if (!snapshot_) return out;
  for (size_t r = 0; r < matrix_.entry_indices.size(); ++r) {
    const LedgerEntry& entry = snapshot_->entries[static_cast<size_t>(matrix_.entry_indices[r])];
    QString token = QString::fromStdString(snapshot_->tokenText(entry.token));
    token.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    out += QStringLiteral("%1,%2,\"%3\",%4,%5,%6,%7")
               .arg(entry.position)
               .arg(entry.token)
               .arg(token)
               .arg(QString::fromUtf8(rowStatusName(matrix_.status[r])))
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

void KvHeatmapView::onMouseMove(QMouseEvent* event) {
  if (!snapshot_ || rowCount() == 0) return;
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const int row = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  const int col = static_cast<int>(std::lround(x));
  if (row < 0) {
    emit hoverText(QString());
    return;
  }
  const LedgerEntry& entry = snapshot_->entries[static_cast<size_t>(matrix_.entry_indices[static_cast<size_t>(row)])];
  QString text = QStringLiteral("%1 pos %2 '%3' (%4)")
                     .arg(role_ == CacheRole::Target ? tr("target") : tr("drafter"))
                     .arg(entry.position)
                     .arg(displayToken(snapshot_->tokenText(entry.token)))
                     .arg(QString::fromUtf8(rowStatusName(matrix_.status[static_cast<size_t>(row)])));
  if (col >= 0 && col < matrix_.cols) {
    text += QStringLiteral(" \u00b7 dim %1: %2 = %3")
                .arg(col)
                .arg(values_ ? QStringLiteral("V") : QStringLiteral("K"))
                .arg(static_cast<double>(matrix_.values[static_cast<size_t>(row * matrix_.cols + col)]), 0, 'f', 4);
  }
  emit hoverText(text);
}

void KvHeatmapView::onMousePress(QMouseEvent* event) {
  const int row = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  if (row >= 0) emit entryClicked(matrix_.entry_indices[static_cast<size_t>(row)]);
}

}  // namespace kvscope::ui
