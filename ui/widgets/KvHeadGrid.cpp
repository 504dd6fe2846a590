#include "ui/widgets/KvHeadGrid.h"

#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/BinnedHeatmap.h"
#include "ui/widgets/PlotExport.h"

namespace kvscope::ui {

KvHeadGrid::KvHeadGrid(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  plot_->setObjectName(QStringLiteral("kvHeadGrid"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  installPlotExport(plot_, QStringLiteral("kv-heads"));
}

void KvHeadGrid::show(const SessionSnapshot* snapshot, const Cursor& cursor, CacheRole role, int layer, bool values,
                      const ColorRange& range, const HeatmapViewport& viewport) {
  matrices_.clear();
  heads_ = 0;
  const CacheGeometry geometry = snapshot ? snapshot->geometry(role) : CacheGeometry{};
  first_head_ = static_cast<int>(geometry.first_kv_head);
  if (snapshot && cursor.valid() && geometry.present) {
    heads_ = static_cast<int>(geometry.kv_heads);
    double extent = 1e-6;
    for (int h = 0; h < heads_; ++h) {
      matrices_.push_back(cacheMatrix(*snapshot, role, cursor.moment(), layer, h, values));
      extent = std::max({extent, std::fabs(static_cast<double>(matrices_.back().min)),
                         std::fabs(static_cast<double>(matrices_.back().max))});
    }
    lower_ = range.autofit ? -extent : range.lower;
    upper_ = range.autofit ? extent : std::max(range.upper, range.lower + 1e-9);
  }
  setViewport(viewport);
}

void KvHeadGrid::setViewport(const HeatmapViewport& viewport) {
  viewport_ = viewport;
  plot_->clearItems();
  plot_->clearPlottables();
  plot_->plotLayout()->clear();
  binnings_.assign(static_cast<size_t>(heads_), RowBinning{});
  const int columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(heads_)))));
  for (int h = 0; h < heads_; ++h) {
    auto* rect = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(h / columns, h % columns, rect);
  }
  // Lay the rects out first: how many rows share a pixel line depends on their height.
  plot_->plotLayout()->setOuterRect(plot_->rect());
  for (auto phase : {QCPLayoutElement::upPreparation, QCPLayoutElement::upMargins, QCPLayoutElement::upLayout}) {
    plot_->plotLayout()->update(phase);
  }
  for (int h = 0; h < heads_; ++h) drawHead(h, columns);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void KvHeadGrid::drawHead(int h, int columns) {
  const CacheMatrix& matrix = matrices_[static_cast<size_t>(h)];
  const int rows = static_cast<int>(matrix.rows.size());
  const int cols = static_cast<int>(matrix.cols);
  QCPAxisRect* rect = plot_->axisRects()[h];
  QCPAxis* x = rect->axis(QCPAxis::atBottom);
  QCPAxis* y = rect->axis(QCPAxis::atLeft);
  y->setRangeReversed(true);
  x->setTickLabelFont(QFont(font().family(), 7));
  y->setTickLabelFont(QFont(font().family(), 7));
  x->setLabel(QStringLiteral("kv head %1").arg(first_head_ + h));  // a rank's heads as the model numbers them
  x->setLabelFont(QFont(font().family(), 8));
  auto* map = new QCPColorMap(x, y);
  map->setInterpolate(false);
  map->setGradient(QCPColorGradient::gpPolar);
  map->setDataRange(QCPRange(lower_, upper_));
  const AxisSpan& span = viewport_.rows();
  RowBinning& binning = binnings_[static_cast<size_t>(h)];
  binning = binRows(rows, span.lower, span.upper, std::max(1, rect->height()));
  fillBinnedMap(map, matrix, binning);
  drawBinMarks(plot_, rect, binning, binMarks(matrix, binning), cols);
  auto dims = QSharedPointer<QCPAxisTickerText>::create();  // no ticks under the status columns
  for (int c = 0; c < cols; c += std::max(1, cols / 4)) dims->addTick(c, QString::number(c));
  x->setTicker(dims);
  y->setLabel(h % columns == 0 ? QStringLiteral("row") : QString());
  x->setRange(viewport_.cols().lower, viewport_.cols().upper);
  y->setRange(span.lower, span.upper);
}

}  // namespace kvscope::ui
