#include "ui/widgets/CompressionErrorPlot.h"

#include <QFontMetrics>
#include <QStringList>
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
  plot_->setToolTip(tr("attention-output error of every layer (rows) and query head (columns): A left, B right, "
                       "one colour scale (darker: larger)"));
  connect(plot_, &QCustomPlot::afterLayout, this, &CompressionErrorPlot::fitLabels);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setSlots({{}, {}});
}

void CompressionErrorPlot::setSlots(const std::vector<Slot>& shown) {
  double high = 0;
  names_.assign(maps_.size(), QString());
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
    names_[i] = shown[i].label.left(1);  // "A", "B": the captions name the settings
    x->setLabel(tr("%1: query head").arg(names_[i]));
    x->setRange(-0.5, static_cast<double>(s->heads) - 0.5);
    rects_[i]->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(s->layers) - 0.5);
  }
  // One scale for both: the same colour is the same error. Budget 1.0 has none at all.
  for (QCPColorMap* map : maps_) map->setDataRange(QCPRange(0, high > 0 ? high : 1e-6));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CompressionErrorPlot::fitLabels() {
  bool changed = false;
  for (size_t i = 0; i < rects_.size() && i < names_.size(); ++i) {
    if (names_[i].isEmpty()) continue;
    QCPAxis* x = rects_[i]->axis(QCPAxis::atBottom);
    const QFontMetrics metrics(x->labelFont());
    const QRect inner = rects_[i]->rect(), outer = rects_[i]->outerRect();
    // Centred under the inner rect, it must stay inside its own outer rect (the other map's label is beyond).
    const int room = 2 * std::min(inner.center().x() - outer.left(), outer.right() - inner.center().x());
    const QStringList labels = {tr("%1: query head").arg(names_[i]), tr("%1: head").arg(names_[i]), names_[i]};
    QString chosen = labels.back();
    for (const QString& label : labels) {
      if (metrics.horizontalAdvance(label) <= room) {
        chosen = label;
        break;
      }
    }
    if (x->label() != chosen) {
      x->setLabel(chosen);
      changed = true;
    }
  }
  if (changed) plot_->replot(QCustomPlot::rpQueuedReplot);
}

double CompressionErrorPlot::shownError(int slot, int64_t layer, int64_t head) const {
  if (slot < 0 || slot >= static_cast<int>(maps_.size())) return std::nan("");
  QCPColorMapData* data = maps_[slot]->data();
  if (head < 0 || head >= data->keySize() || layer < 0 || layer >= data->valueSize()) return std::nan("");
  return data->cell(static_cast<int>(head), static_cast<int>(layer));
}

}  // namespace kvscope::ui
