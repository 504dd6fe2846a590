#include "ui/widgets/KvHeatmapView.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "ui/context/RowLookup.h"
#include "ui/widgets/KvHeadGrid.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/RowLabel.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {
constexpr double kStateLeft = -3.6;  // the status columns, left of dim 0
constexpr double kStatusLeft = -2.7;
constexpr double kStatusMid = -1.8;
constexpr double kStatusRight = -0.9;

QCPItemRect* markRect(QCustomPlot* plot, double left, double top, double right, double bottom, const QPen& pen,
                  const QBrush& brush) {
  auto* item = new QCPItemRect(plot);
  item->topLeft->setCoords(left, top);
  item->bottomRight->setCoords(right, bottom);
  item->setPen(pen);
  item->setBrush(brush);
  return item;
}
}  // namespace

KvHeatmapView::KvHeatmapView(CacheRole role, QWidget* parent) : QWidget(parent), role_(role) {
  setObjectName(role == CacheRole::Target ? QStringLiteral("targetKv") : QStringLiteral("drafterKv"));
  title_ = new QLabel(role == CacheRole::Target ? tr("<b>Target cache</b>") : tr("<b>Drafter cache</b>"));
  layer_box_ = new QComboBox;
  head_box_ = new QComboBox;
  layer_box_->setToolTip(tr("layer (shared by every panel)"));
  head_box_->setToolTip(tr("kv head (shared by every panel)"));
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("head")));
  header->addWidget(head_box_);
  all_heads_ = new QCheckBox(tr("all"));
  all_heads_->setToolTip(tr("All heads: every kv head of the layer, side by side"));
  header->addWidget(all_heads_);
  header->addStretch(1);

  plot_ = new QCustomPlot;
  plot_->setObjectName(objectName() + QStringLiteral("Plot"));
  plot_->setMinimumSize(200, 80);
  plot_->axisRect()->setupFullAxesBox(true);
  plot_->yAxis->setRangeReversed(true);
  plot_->xAxis->setLabel(tr("head_dim"));
  plot_->yAxis->setLabel(tr("row: position 'token'"));
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
    emit allHeadsToggled();
  });
  const auto picked = [this] {
    emit layerHeadPicked(role_, std::max(0, layer_box_->currentIndex()), std::max(0, head_box_->currentIndex()));
  };
  connect(layer_box_, &QComboBox::currentIndexChanged, this, picked);
  connect(head_box_, &QComboBox::currentIndexChanged, this, picked);
}

void KvHeatmapView::setAllHeads(bool all) { all_heads_->setChecked(all); }
bool KvHeatmapView::allHeads() const { return all_heads_->isChecked(); }

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
  if (layer_box_->count() != layers) {
    layer_box_->clear();
    for (int i = 0; i < layers; ++i) layer_box_->addItem(QString::number(i));
  }
  if (head_box_->count() != heads) {
    head_box_->clear();
    for (int i = 0; i < heads; ++i) head_box_->addItem(QString::number(i));
  }
  layer_box_->setCurrentIndex(layers > 0 ? layer_ : -1);
  head_box_->setCurrentIndex(heads > 0 ? head_ : -1);
}

void KvHeatmapView::show(std::shared_ptr<const SessionSnapshot> shown, const Cursor& cursor, bool values,
                         const ColorRange& range) {
  snapshot_ = std::move(shown);
  const SessionSnapshot* snapshot = snapshot_.get();
  values_ = values;
  updateSelectors(snapshot, cursor);
  plot_->clearItems();
  missing_.clear();
  if (!snapshot || !cursor.valid() || !snapshot->geometry(role_).present) {
    matrix_ = CacheMatrix{};
    map_->data()->clear();
    title_->setText(role_ == CacheRole::Target ? tr("<b>Target cache</b>")
                                               : tr("<b>Drafter cache</b> (no model drafter)"));
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  if (allHeads()) grid_->show(snapshot, cursor, role_, layer_, values, range);
  matrix_ = cacheMatrix(*snapshot, role_, cursor.moment(), layer_, head_, values);
  for (const RowVerdict& v : rowVerdicts(*snapshot, role_, layer_, cursor.moment())) {
    if (v.state == RowState::Missing) missing_.push_back(v);
  }
  const int bad = rowCount() - countState(RowState::Ok) + static_cast<int>(missing_.size());
  title_->setText(QStringLiteral("<b>%1</b> %2 &middot; %3 rows, %4 new, %5 removed%6")
                      .arg(role_ == CacheRole::Target ? tr("Target") : tr("Drafter"))
                      .arg(values ? QStringLiteral("V") : QStringLiteral("K"))
                      .arg(rowCount() - countStatus(RowStatus::Pruned) - countStatus(RowStatus::WrittenPruned))
                      .arg(countStatus(RowStatus::Written) + countStatus(RowStatus::WrittenPruned))
                      .arg(countStatus(RowStatus::Pruned) + countStatus(RowStatus::WrittenPruned))
                      .arg(bad > 0 ? tr(" &middot; <b style='color:#c00'>%1 wrong</b>").arg(bad) : QString()));
  fillMap(range);
  drawMarks(*snapshot, cursor);
  drawLabels(*snapshot);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void KvHeatmapView::fillMap(const ColorRange& range) {
  const int rows = rowCount();
  const int cols = static_cast<int>(matrix_.cols);
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
}

void KvHeatmapView::drawMarks(const SessionSnapshot& snapshot, const Cursor& cursor) {
  const int cols = static_cast<int>(matrix_.cols);
  for (int r = 0; r < rowCount(); ++r) {
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    const bool written = row.status == RowStatus::Written || row.status == RowStatus::WrittenPruned;
    const bool pruned = row.status == RowStatus::Pruned || row.status == RowStatus::WrittenPruned;
    if (row.state != RowState::Ok) {  // identity breaks the bookkeeping: the verdict's colour, and hatched
      const QColor color = Palette::rowState(row.state);
      markRect(plot_, kStateLeft, r - 0.5, kStatusLeft, r + 0.5, Qt::NoPen, color);
      markRect(plot_, -0.5, r - 0.5, cols - 0.5, r + 0.5, QPen(color, 1.5), QBrush(color, Qt::BDiagPattern));
    }
    if (written) markRect(plot_, kStatusLeft, r - 0.5, kStatusMid, r + 0.5, Qt::NoPen, Palette::written());
    if (pruned) {
      markRect(plot_, kStatusMid, r - 0.5, kStatusRight, r + 0.5, Qt::NoPen, Palette::pruned());
      markRect(plot_, -0.5, r - 0.5, cols - 0.5, r + 0.5, QPen(Palette::pruned(), 1), QColor(255, 255, 255, 150));
    }
  }
  for (const RowVerdict& v : missing_) {  // a dashed line where the missing row belongs
    auto* line = new QCPItemLine(plot_);
    line->start->setCoords(kStateLeft, v.row - 0.5);
    line->end->setCoords(cols - 0.5, v.row - 0.5);
    line->setPen(QPen(Palette::rowState(RowState::Missing), 2.5, Qt::DashLine));
  }
  // The selection: this cache's selected row; in the other cache, rows for the selected position.
  for (int r = 0; r < rowCount(); ++r) {
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    const bool mine = cursor.cache == role_;
    const bool selected = mine ? row.entry == cursor.entry
                               : snapshot.entries[static_cast<size_t>(row.entry)].position == cursor.position;
    if (!selected) continue;
    markRect(plot_, kStateLeft, r - 0.5, cols - 0.5, r + 0.5, QPen(Palette::selection(), mine ? 2.5 : 1.5, mine ? Qt::SolidLine : Qt::DotLine),
         Qt::NoBrush);
  }
  if (cursor.cache == role_ && cursor.entry < 0 && cursor.row >= 0) {
    markRect(plot_, kStateLeft, cursor.row - 0.5, cols - 0.5, cursor.row + 0.5, QPen(Palette::selection(), 2.5), Qt::NoBrush);
  }
}

void KvHeatmapView::drawLabels(const SessionSnapshot& snapshot) {
  const int rows = rowCount();
  const int cols = static_cast<int>(matrix_.cols);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const int label_rows = std::max(4, plot_->axisRect()->height() / 13);
  const int step = std::max(1, (rows + label_rows - 1) / label_rows);
  for (int r = 0; r < rows; ++r) {
    // Thinned out to fit, but a row that breaks the bookkeeping is always named.
    const ViewRow& row = matrix_.rows[static_cast<size_t>(r)];
    if (r % step == 0 || row.state != RowState::Ok) ticker->addTick(r, rowLabel(snapshot, row));
  }
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setTickLabelFont(QFont(font().family(), 7));
  auto dims = QSharedPointer<QCPAxisTickerText>::create();  // integer dims only, none under the status columns
  const int dim_step = std::max(1, cols / 8);
  for (int c = 0; c < cols; c += dim_step) dims->addTick(c, QString::number(c));
  plot_->xAxis->setTicker(dims);
  plot_->xAxis->setRange(kStateLeft - 0.2, std::max(cols, 1) - 0.5);
  plot_->yAxis->setRange(-0.5, std::max(rows, 1) - 0.5);
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

void KvHeatmapView::onMouseMove(QMouseEvent* event) {
  if (!snapshot_ || rowCount() == 0) return;
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const int r = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  const int col = static_cast<int>(std::lround(x));
  if (r < 0) {
    emit hoverText(QString());
    return;
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
  if (row.state != RowState::Ok) text += QStringLiteral(" \u00b7 %1").arg(QString::fromUtf8(rowStateName(row.state)).toUpper());
  if (col >= 0 && col < matrix_.cols) {
    text += QStringLiteral(" \u00b7 dim %1: %2 = %3")
                .arg(col)
                .arg(values_ ? QStringLiteral("V") : QStringLiteral("K"))
                .arg(static_cast<double>(matrix_.values[static_cast<size_t>(r * matrix_.cols + col)]), 0, 'f', 4);
  }
  emit hoverText(text);
}

void KvHeatmapView::onMousePress(QMouseEvent* event) {
  const int row = rowAt(plot_->yAxis->pixelToCoord(event->position().y()));
  if (row >= 0) emit entryClicked(matrix_.rows[static_cast<size_t>(row)].entry);
}

}  // namespace kvscope::ui
