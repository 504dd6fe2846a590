#include "ui/widgets/CompressionMetricsPlot.h"

#include <QVBoxLayout>

#include <algorithm>

#include <qcustomplot.h>

#include "ui/widgets/PlotExport.h"

namespace kvscope::ui {

namespace {
constexpr int kSlots = 2;  // A and B: the graphs exist from the start, so presenter zoom sizes their markers
}

CompressionMetricsPlot::CompressionMetricsPlot(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("compressionMetrics"));
  plot_->setMinimumSize(260, 220);
  QCPAxisRect* kl_rect = plot_->axisRect();
  mass_rect_ = new QCPAxisRect(plot_);
  plot_->plotLayout()->addElement(1, 0, mass_rect_);
  kl_rect->setMinimumSize(60, 44);
  mass_rect_->setMinimumSize(60, 44);
  auto* margins = new QCPMarginGroup(plot_);
  kl_rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
  mass_rect_->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
  // The two share the decode steps: zooming or panning one moves the other.
  connect(kl_rect->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
          mass_rect_->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::setRange));
  kl_rect->axis(QCPAxis::atLeft)->setLabel(tr("KL (nats)"));
  kl_rect->axis(QCPAxis::atBottom)->setTickLabels(false);
  mass_rect_->axis(QCPAxis::atLeft)->setLabel(tr("mass kept"));
  mass_rect_->axis(QCPAxis::atBottom)->setLabel(tr("decode step (position fed)"));

  for (int i = 0; i < kSlots; ++i) {
    QCPGraph* kl = plot_->addGraph(kl_rect->axis(QCPAxis::atBottom), kl_rect->axis(QCPAxis::atLeft));
    QCPGraph* miss = plot_->addGraph(kl_rect->axis(QCPAxis::atBottom), kl_rect->axis(QCPAxis::atLeft));
    QCPGraph* mass = plot_->addGraph(mass_rect_->axis(QCPAxis::atBottom), mass_rect_->axis(QCPAxis::atLeft));
    miss->setLineStyle(QCPGraph::lsNone);
    miss->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, 8));
    kl->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
    kl_.push_back(kl);
    miss_.push_back(miss);
    mass_.push_back(mass);
  }
  // The legend above the plots, two columns (a slot's KL and its top-1 misses): it hides no step.
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  plot_->legend->setRowSpacing(0);
  plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot_->legend->setWrap(2);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, plot_->legend);  // moves it out of the axis rect's inset layout
  plot_->plotLayout()->setRowStretchFactors({0.01, 1.0, 1.0});
  plot_->legend->setMargins(QMargins(4, 2, 4, 2));
  installPlotExport(plot_, QStringLiteral("compression-metrics"), [this] { return csv(); });
  connect(plot_, &QCustomPlot::beforeReplot, this, &CompressionMetricsPlot::fitLegend);

  // Before a run: words, not empty axes that read as a flat curve.
  placeholder_ = new QCPItemText(plot_);
  placeholder_->setObjectName(QStringLiteral("compressionMetricsPlaceholder"));
  placeholder_->position->setType(QCPItemPosition::ptViewportRatio);
  placeholder_->position->setCoords(0.55, 0.5);
  placeholder_->setPositionAlignment(Qt::AlignCenter);
  placeholder_->setClipToAxisRect(false);
  placeholder_->setTextAlignment(Qt::AlignCenter);
  placeholder_->setColor(QColor(90, 90, 90));
  placeholder_->setBrush(QColor(255, 255, 255, 230));
  placeholder_->setPadding(QMargins(6, 4, 6, 4));
  placeholder_->setText(tr("Run to see the KL and the\nattention mass kept per decode step"));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setCurves({});
}

void CompressionMetricsPlot::setCurves(const std::vector<Curve>& curves) {
  labels_.clear();
  plot_->legend->clearItems();
  double kl_max = 0, mass_min = 1;
  QCPRange keys(0, 1);
  bool any = false;
  for (int i = 0; i < kSlots; ++i) {
    QVector<double> steps, kl, mass, miss_at, miss_kl;
    const bool drawn = i < static_cast<int>(curves.size()) && curves[i].summary != nullptr;
    if (drawn) {
      for (const CompressionStep& step : curves[i].summary->steps) {
        steps << static_cast<double>(step.position);
        keys = any ? QCPRange(std::min(keys.lower, steps.back()), std::max(keys.upper, steps.back()))
                   : QCPRange(steps.back(), steps.back());
        any = true;
        kl << step.kl;
        mass << step.attention_mass;
        kl_max = std::max(kl_max, step.kl);
        mass_min = std::min(mass_min, step.attention_mass);
        if (step.top1_full != step.top1_compressed) {
          miss_at << static_cast<double>(step.position);
          miss_kl << step.kl;
        }
      }
      const QColor color = curves[i].color;
      kl_[i]->setPen(QPen(color, 2));
      kl_[i]->setName(curves[i].label);  // the axes say KL and mass
      mass_[i]->setPen(QPen(color, 2));
      miss_[i]->setPen(QPen(color.darker(160), 2));
      miss_[i]->setName(tr("%1: top-1 differs").arg(curves[i].label.left(1)));
      labels_.push_back(curves[i].label);
    }
    kl_[i]->setData(steps, kl, true);
    mass_[i]->setData(steps, mass, true);
    miss_[i]->setData(miss_at, miss_kl, true);
    if (drawn) {
      kl_[i]->addToLegend();
      if (!miss_at.isEmpty()) miss_[i]->addToLegend();
    }
  }
  placeholder_->setVisible(!any);
  plot_->legend->setVisible(any);
  QCPAxisRect* kl_rect = plot_->axisRect(0);
  kl_rect->axis(QCPAxis::atBottom)->setRange(keys.lower - 0.5, keys.upper + 0.5);
  // KL 0 (budget 1.0) still gets a readable axis.
  kl_rect->axis(QCPAxis::atLeft)->setRange(0, kl_max > 0 ? kl_max * 1.1 : 0.01);
  mass_rect_->axis(QCPAxis::atLeft)->setRange(std::max(0.0, mass_min - 0.05), 1.02);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString CompressionMetricsPlot::placeholderText() const { return placeholder_->visible() ? placeholder_->text() : QString(); }

void CompressionMetricsPlot::fitLegend() {
  QCPLegend* legend = plot_->legend;
  const auto arrange = [legend](int wrap) {
    if (legend->wrap() == wrap) return;
    legend->setWrap(wrap);
    legend->setFillOrder(QCPLegend::foColumnsFirst, true);  // re-places the items
  };
  arrange(2);
  if (legend->minimumOuterSizeHint().width() > plot_->width()) arrange(1);
}

int CompressionMetricsPlot::curveCount() const {
  int count = 0;
  for (QCPGraph* graph : kl_) count += graph->dataCount() > 0 ? 1 : 0;
  return count;
}

std::vector<double> CompressionMetricsPlot::klValues(int curve) const {
  std::vector<double> values;
  if (curve < 0 || curve >= static_cast<int>(kl_.size())) return values;
  for (auto it = kl_[curve]->data()->constBegin(); it != kl_[curve]->data()->constEnd(); ++it) values.push_back(it->value);
  return values;
}

std::vector<double> CompressionMetricsPlot::massValues(int curve) const {
  std::vector<double> values;
  if (curve < 0 || curve >= static_cast<int>(mass_.size())) return values;
  for (auto it = mass_[curve]->data()->constBegin(); it != mass_[curve]->data()->constEnd(); ++it) values.push_back(it->value);
  return values;
}

QString CompressionMetricsPlot::csv() const {
  QString text = QStringLiteral("slot,position,kl,attention_mass\n");
  for (size_t i = 0; i < labels_.size(); ++i) {
    const std::vector<double> kl = klValues(static_cast<int>(i)), mass = massValues(static_cast<int>(i));
    auto key = kl_[i]->data()->constBegin();
    for (size_t j = 0; j < kl.size() && j < mass.size(); ++j, ++key) {
      text += QStringLiteral("%1,%2,%3,%4\n").arg(labels_[i]).arg(key->key).arg(kl[j], 0, 'g', 8).arg(mass[j], 0, 'g', 8);
    }
  }
  return text;
}

}  // namespace kvscope::ui
