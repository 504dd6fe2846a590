#include "ui/widgets/CompressionErrorPlot.h"

#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include <qcustomplot.h>

#include "ui/widgets/HoverCellHighlight.h"
#include "ui/widgets/PlotExport.h"

namespace kvscope::ui {

CompressionErrorPlot::CompressionErrorPlot(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("compressionOutputError"));
  plot_->setMinimumSize(240, 150);
  new HoverCellHighlight(plot_);
  plot_->plotLayout()->clear();
  scale_ = new QCPColorScale(plot_);
  scale_->setBarWidth(8);
  scale_->setLabel(tr("output error"));
  auto* margins = new QCPMarginGroup(plot_);
  QCPColorGradient gradient(QCPColorGradient::gpHot);
  for (int i = 0; i < 2; ++i) {
    auto* rect = new QCPAxisRect(plot_);
    rect->setupFullAxesBox(false);
    rect->setMinimumSize(44, 44);
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // layer 0 on top
    rect->axis(QCPAxis::atLeft)->setLabel(i == 0 ? tr("layer") : QString());
    rect->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    for (QCPAxis* axis : {rect->axis(QCPAxis::atLeft), rect->axis(QCPAxis::atBottom)}) {
      axis->setTicker(QSharedPointer<QCPAxisTickerFixed>::create());
      axis->ticker().staticCast<QCPAxisTickerFixed>()->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    }
    plot_->plotLayout()->addElement(0, i, rect);
    auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    map->setInterpolate(false);
    map->setColorScale(scale_);
    map->setGradient(gradient.inverted());  // larger error: darker
    rects_.push_back(rect);
    maps_.push_back(map);
  }
  plot_->plotLayout()->addElement(0, 2, scale_);
  scale_->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
  plot_->plotLayout()->setColumnStretchFactors({1.0, 1.0, 0.1});
  installPlotExport(plot_, QStringLiteral("compression-output-error"));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setSlots({{}, {}});
}

void CompressionErrorPlot::setSlots(const std::vector<Slot>& shown) {
  double high = 0;
  for (size_t i = 0; i < maps_.size(); ++i) {
    QCPColorMapData* data = maps_[i]->data();
    data->clear();
    const CompressionSummary* s = i < shown.size() ? shown[i].summary : nullptr;
    QCPAxis* x = rects_[i]->axis(QCPAxis::atBottom);
    if (s == nullptr || s->output_error.empty()) {
      x->setLabel(i < shown.size() && !shown[i].label.isEmpty() ? tr("%1: no result").arg(shown[i].label) : QString());
      continue;
    }
    data->setSize(static_cast<int>(s->heads), static_cast<int>(s->layers));
    data->setRange(QCPRange(0, static_cast<double>(s->heads - 1)), QCPRange(0, static_cast<double>(s->layers - 1)));
    for (int64_t l = 0; l < s->layers; ++l) {
      for (int64_t h = 0; h < s->heads; ++h) {
        const double error = s->outputError(l, h);
        data->setCell(static_cast<int>(h), static_cast<int>(l), error);
        high = std::max(high, error);
      }
    }
    x->setLabel(tr("%1: query head").arg(shown[i].label.left(1)));  // "A", "B": the captions name the settings
    x->setRange(-0.5, static_cast<double>(s->heads) - 0.5);
    rects_[i]->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(s->layers) - 0.5);
  }
  // One scale for both: the same colour is the same error. Budget 1.0 has none at all.
  for (QCPColorMap* map : maps_) map->setDataRange(QCPRange(0, high > 0 ? high : 1e-6));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

double CompressionErrorPlot::shownError(int slot, int64_t layer, int64_t head) const {
  if (slot < 0 || slot >= static_cast<int>(maps_.size())) return std::nan("");
  QCPColorMapData* data = maps_[slot]->data();
  if (head < 0 || head >= data->keySize() || layer < 0 || layer >= data->valueSize()) return std::nan("");
  return data->cell(static_cast<int>(head), static_cast<int>(layer));
}

}  // namespace kvscope::ui
