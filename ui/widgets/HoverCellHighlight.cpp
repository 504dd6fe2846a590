#include "ui/widgets/HoverCellHighlight.h"

#include <cmath>
#include <qcustomplot.h>

namespace kvscope::ui {

HoverCellHighlight::HoverCellHighlight(QCustomPlot* plot) : QObject(plot), plot_(plot) {
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &HoverCellHighlight::onMove);
  plot_->installEventFilter(this);  // Leave
}

bool HoverCellHighlight::shown() const { return outline_ && outline_->visible(); }

bool HoverCellHighlight::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::Leave) hide();
  return QObject::eventFilter(watched, event);
}

void HoverCellHighlight::hide() {
  if (!shown()) return;
  outline_->setVisible(false);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void HoverCellHighlight::onMove(QMouseEvent* event) {
  const QPointF at = event->position();
  QCPAxisRect* rect = plot_->axisRectAt(at);
  QCPAxis* x = rect ? rect->axis(QCPAxis::atBottom) : nullptr;
  QCPAxis* y = rect ? rect->axis(QCPAxis::atLeft) : nullptr;
  if (!rect || !x || !y || !rect->rect().contains(at.toPoint())) {
    hide();
    return;
  }
  const double cx = std::round(x->pixelToCoord(at.x()));
  const double cy = std::round(y->pixelToCoord(at.y()));
  if (!outline_) {
    outline_ = new QCPItemRect(plot_);
    outline_->setSelectable(false);
    if (plot_->layer(QStringLiteral("overlay"))) outline_->setLayer(QStringLiteral("overlay"));
    outline_->setPen(QPen(QColor(0, 200, 255), 3));
    outline_->setBrush(Qt::NoBrush);
  }
  outline_->setClipAxisRect(rect);
  outline_->topLeft->setAxes(x, y);
  outline_->bottomRight->setAxes(x, y);
  outline_->topLeft->setCoords(cx - 0.5, cy - 0.5);
  outline_->bottomRight->setCoords(cx + 0.5, cy + 0.5);
  outline_->setVisible(true);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace kvscope::ui
