#include "ui/widgets/StepBarPlot.h"

#include <QEvent>
#include <QFontMetrics>
#include <algorithm>
#include <cmath>

namespace kvscope::ui {

StepBarPlot::StepBarPlot(const QString& object_name, QWidget* parent) : QCustomPlot(parent) {
  setObjectName(object_name);
  setMinimumHeight(120);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setFixedHeight(kHeightAt100);
  built_point_size_ = font().pointSizeF();
  before_ = new QCPBars(xAxis, yAxis);
  before_->setPen(Qt::NoPen);
  before_->setBrush(beforeColor());
  after_ = new QCPBars(xAxis, yAxis);
  after_->setPen(Qt::NoPen);
  after_->setBrush(afterColor());
  after_->setVisible(false);
  group_ = new QCPBarsGroup(this);
  group_->setSpacing(0);
  highlight_ = new QCPItemRect(this);
  highlight_->setPen(Qt::NoPen);
  highlight_->setBrush(QColor(255, 170, 0, 60));
  highlight_->setLayer(QStringLiteral("background"));
  highlight_->setVisible(false);
  highlight_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  highlight_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  xAxis->setTickLabelRotation(50);
  // The zoom scales the tick labels after the widget's font: measured again before each drawing.
  connect(this, &QCustomPlot::beforeReplot, this, &StepBarPlot::fitHeight);
  yAxis->setNumberFormat(QStringLiteral("g"));
  yAxis->setNumberPrecision(3);
  yAxis->ticker()->setTickCount(4);
}

void StepBarPlot::fill(QCPBars* bars, const QVector<double>& values) {
  QVector<double> keys, shown;
  for (int i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;  // a masked key: no bar
    keys.push_back(i);
    shown.push_back(values[i]);
  }
  bars->setData(keys, shown, true);
}

void StepBarPlot::setValues(const QVector<double>& before, const QString& before_name, const QVector<double>& after,
                            const QString& after_name) {
  count_ = static_cast<int>(before.size());
  const bool two = !after.isEmpty();
  fill(before_, before);
  fill(after_, after);
  before_->setName(before_name);
  after_->setName(after_name);
  after_->setVisible(two);
  // Side by side when there are two series; one full-width bar otherwise.
  before_->setBarsGroup(two ? group_ : nullptr);
  after_->setBarsGroup(two ? group_ : nullptr);
  before_->setWidth(two ? 0.42 : 0.8);
  after_->setWidth(0.42);
  legend->setVisible(false);  // the card's text names the series: a legend would cover bars
  double low = 0, high = 0;
  for (const QVector<double>* series : {&before, &after}) {
    for (double v : *series) {
      if (std::isnan(v)) continue;
      low = std::min(low, v);
      high = std::max(high, v);
    }
  }
  const double pad = std::max((high - low) * 0.08, 1e-6);
  yAxis->setRange(low < 0 ? low - pad : 0, high > 0 ? high + pad : pad);
  xAxis->setRange(-0.6, std::max(count_, 1) - 0.4);
  updateTicks();
  replot(QCustomPlot::rpQueuedReplot);
}

void StepBarPlot::setKeyLabels(const QStringList& labels, const QString& axis_label) {
  labels_ = labels;
  xAxis->setLabel(axis_label);
  xAxis->setTickLabelRotation(labels.isEmpty() ? 0 : 50);
  fitHeight();
  updateTicks();
}

void StepBarPlot::setHighlight(int index) {
  highlight_->setVisible(index >= 0);
  highlight_->topLeft->setCoords(index - 0.5, 0);
  highlight_->bottomRight->setCoords(index + 0.5, 1);
}

QVector<double> StepBarPlot::values(int series) const {
  const QCPBars* bars = series == 0 ? before_ : after_;
  QVector<double> out(count_, std::nan(""));
  for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) {
    const int i = static_cast<int>(std::lround(it->key));
    if (i >= 0 && i < count_) out[i] = it->value;
  }
  return out;
}

void StepBarPlot::changeEvent(QEvent* event) {
  QCustomPlot::changeEvent(event);
  if (event->type() == QEvent::FontChange) fitHeight();
}

void StepBarPlot::fitHeight() {
  const double scale = built_point_size_ > 0 && font().pointSizeF() > 0 ? std::max(1.0, font().pointSizeF() / built_point_size_) : 1.0;
  // Slanted token labels ("7 'Moses'") stand taller than a number: the plot
  // grows by their extra height, so the bars keep theirs (they were crushed
  // to a few pixels under long labels).
  int slant = 0;
  if (!labels_.isEmpty()) {
    const QFontMetrics metrics(xAxis->tickLabelFont());
    int widest = 0;
    for (const QString& label : labels_) widest = std::max(widest, metrics.horizontalAdvance(label));
    const double angle = xAxis->tickLabelRotation() * M_PI / 180.0;
    slant = static_cast<int>(std::ceil(widest * std::sin(angle) + metrics.height() * std::cos(angle))) - metrics.height();
  }
  setFixedHeight(static_cast<int>(std::lround(kHeightAt100 * scale)) + std::max(slant, 0));
}

void StepBarPlot::resizeEvent(QResizeEvent* event) {
  QCustomPlot::resizeEvent(event);
  updateTicks();
  replot(QCustomPlot::rpQueuedReplot);  // the ticks changed after QCustomPlot's own replot
}

void StepBarPlot::updateTicks() {
  // One label per `step` bars, so that no two labels overlap at this width.
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  // The widget's width, not the axis rect's: that one is laid out only at the next replot.
  const int width = std::max(this->width() - 70, 80);
  const QFontMetrics metrics(xAxis->tickLabelFont());
  const int per_label = labels_.isEmpty() ? metrics.horizontalAdvance(QStringLiteral("0000")) + 6
                                          : std::max(16, metrics.height() + 4);
  const int step = std::max(1, (count_ * per_label + width - 1) / width);
  for (int i = 0; i < count_; ++i) {
    // The last bar (the query's own row) always gets its label; a regular one too close to it does not.
    const bool last = i == count_ - 1;
    if (!last && (i % step != 0 || count_ - 1 - i < step)) continue;
    ticker->addTick(i, labels_.isEmpty() ? QString::number(i) : labels_.value(i));
  }
  xAxis->setTicker(ticker);
}

}  // namespace kvscope::ui
