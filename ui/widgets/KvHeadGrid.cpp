#include "ui/widgets/KvHeadGrid.h"

#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/Palette.h"
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
                      const ColorRange& range) {
  plot_->clearItems();
  plot_->clearPlottables();
  plot_->plotLayout()->clear();
  heads_ = 0;
  const CacheGeometry geometry = snapshot ? (role == CacheRole::Target ? snapshot->target : snapshot->drafter)
                                          : CacheGeometry{};
  if (!snapshot || !cursor.valid() || !geometry.present) {
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  heads_ = static_cast<int>(geometry.kv_heads);
  std::vector<CacheMatrix> matrices;
  double extent = 1e-6;
  for (int h = 0; h < heads_; ++h) {
    matrices.push_back(cacheMatrix(*snapshot, role, cursor.moment(), layer, h, values));
    extent = std::max({extent, std::fabs(static_cast<double>(matrices.back().min)),
                       std::fabs(static_cast<double>(matrices.back().max))});
  }
  const QCPRange data_range = range.autofit ? QCPRange(-extent, extent)
                                            : QCPRange(range.lower, std::max(range.upper, range.lower + 1e-9));
  const int columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(heads_)))));
  for (int h = 0; h < heads_; ++h) {
    const CacheMatrix& matrix = matrices[static_cast<size_t>(h)];
    const int rows = static_cast<int>(matrix.rows.size());
    const int cols = static_cast<int>(matrix.cols);
    auto* rect = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(h / columns, h % columns, rect);
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);
    y->setRangeReversed(true);
    x->setTickLabelFont(QFont(font().family(), 7));
    y->setTickLabelFont(QFont(font().family(), 7));
    x->setLabel(QStringLiteral("kv head %1").arg(h));
    x->setLabelFont(QFont(font().family(), 8));
    auto* map = new QCPColorMap(x, y);
    map->setInterpolate(false);
    map->setGradient(QCPColorGradient::gpPolar);
    map->setDataRange(data_range);
    map->data()->setSize(std::max(cols, 1), std::max(rows, 1));
    map->data()->setRange(QCPRange(0, std::max(cols - 1, 1)), QCPRange(0, std::max(rows - 1, 1)));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) map->data()->setCell(c, r, matrix.values[static_cast<size_t>(r * cols + c)]);
      const ViewRow& row = matrix.rows[static_cast<size_t>(r)];
      const bool written = row.status == RowStatus::Written || row.status == RowStatus::WrittenPruned;
      const bool pruned = row.status == RowStatus::Pruned || row.status == RowStatus::WrittenPruned;
      if (!written && !pruned && row.state == RowState::Ok) continue;
      const auto mark = [&](double left, double right, const QColor& color) {
        auto* item = new QCPItemRect(plot_);
        item->setClipAxisRect(rect);
        item->topLeft->setAxes(x, y);
        item->bottomRight->setAxes(x, y);
        item->topLeft->setCoords(left, r - 0.5);
        item->bottomRight->setCoords(right, r + 0.5);
        item->setPen(Qt::NoPen);
        item->setBrush(color);
      };
      if (row.state != RowState::Ok) mark(-3.6, -2.7, Palette::rowState(row.state));
      if (written) mark(-2.7, -1.8, Palette::written());
      if (pruned) mark(-1.8, -0.9, Palette::pruned());
      if (pruned) {
        auto* hatch = new QCPItemRect(plot_);
        hatch->setClipAxisRect(rect);
        hatch->topLeft->setAxes(x, y);
        hatch->bottomRight->setAxes(x, y);
        hatch->topLeft->setCoords(-0.5, r - 0.5);
        hatch->bottomRight->setCoords(cols - 0.5, r + 0.5);
        hatch->setPen(QPen(Palette::pruned(), 1));
        hatch->setBrush(QColor(255, 255, 255, 150));
      }
    }
    auto dims = QSharedPointer<QCPAxisTickerText>::create();  // no ticks under the status columns
    for (int c = 0; c < cols; c += std::max(1, cols / 4)) dims->addTick(c, QString::number(c));
    x->setTicker(dims);
    y->setLabel(h % columns == 0 ? QStringLiteral("row") : QString());
    x->setRange(-3.8, std::max(cols, 1) - 0.5);
    y->setRange(-0.5, std::max(rows, 1) - 0.5);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace kvscope::ui
