#include "ui/widgets/LayerHeadOverview.h"

#include <QHelpEvent>
#include <QFontMetrics>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/widgets/Palette.h"

namespace kvscope::ui {

namespace {
constexpr int kStripeWidth = 5;   // verdict stripe
constexpr int kCellWidth = 13;
constexpr double kMaxCellHeight = 16;

QColor shade(float value, float largest) {
  const double t = largest > 0 ? std::clamp(static_cast<double>(value / largest), 0.0, 1.0) : 0.0;
  // White to dark blue: a sequential scale, unlike the heatmap's diverging one.
  return QColor::fromRgbF(1.0 - 0.85 * t, 1.0 - 0.75 * t, 1.0 - 0.45 * t);
}
}  // namespace

QFont LayerHeadOverview::labelFont() const {
  // Two thirds of the widget's font, not a fixed size: the presenter zoom
  // scales the widget's font, and the digits follow it.
  QFont small = font();
  if (small.pointSizeF() > 0) small.setPointSizeF(small.pointSizeF() * 0.65);
  else if (small.pixelSize() > 0) small.setPixelSize(std::max(1, static_cast<int>(small.pixelSize() * 0.65 + 0.5)));
  return small;
}

int LayerHeadOverview::top() const { return QFontMetrics(labelFont()).height() + 2; }  // room for the header ("|K|")

int LayerHeadOverview::labelWidth() const {
  return QFontMetrics(labelFont()).horizontalAdvance(QStringLiteral("00")) + 4;  // layer numbers
}

LayerHeadOverview::LayerHeadOverview(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("layerHeadOverview"));
  setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Expanding);
  setMouseTracking(true);
}

void LayerHeadOverview::show(LayerSummary summary, int layer, int head, bool values) {
  summary_ = std::move(summary);
  largest_ = summary_.max_abs.empty() ? 0.0f : *std::max_element(summary_.max_abs.begin(), summary_.max_abs.end());
  layer_ = layer;
  head_ = head;
  values_ = values;
  updateGeometry();
  update();
}

void LayerHeadOverview::select(int layer, int head) {
  if (layer == layer_ && head == head_) return;
  layer_ = layer;
  head_ = head;
  update();
}

void LayerHeadOverview::clear() { show(LayerSummary{}, 0, 0, values_); }

QSize LayerHeadOverview::sizeHint() const {
  const int heads = static_cast<int>(std::max<int64_t>(summary_.kv_heads, 1));
  return {cellsLeft() + heads * kCellWidth + 2, top() + static_cast<int>(summary_.layers * kMaxCellHeight)};
}

QSize LayerHeadOverview::minimumSizeHint() const { return {sizeHint().width(), top() + 40}; }

int LayerHeadOverview::cellsLeft() const { return labelWidth() + kStripeWidth + 1; }

double LayerHeadOverview::cellHeight() const {
  if (summary_.layers <= 0) return 0;
  return std::min(kMaxCellHeight, static_cast<double>(height() - top() - 1) / static_cast<double>(summary_.layers));
}

QRect LayerHeadOverview::cellRect(int layer, int head) const {
  if (layer < 0 || layer >= summary_.layers || head < 0 || head >= summary_.kv_heads) return {};
  const double h = cellHeight();
  const int upper = top() + static_cast<int>(std::floor(layer * h));
  const int lower = top() + static_cast<int>(std::floor((layer + 1) * h));
  return QRect(cellsLeft() + head * kCellWidth, upper, kCellWidth, std::max(lower - upper, 1));
}

LayerHeadOverview::Cell LayerHeadOverview::cellAt(const QPoint& point) const {
  const double h = cellHeight();
  if (h <= 0 || point.y() < top()) return {};
  const int layer = static_cast<int>((point.y() - top()) / h);
  if (layer >= summary_.layers) return {};
  // Left of the cells (the layer number, the stripe): the layer, keeping the head.
  const int head = point.x() < cellsLeft() ? head_ : (point.x() - cellsLeft()) / kCellWidth;
  if (head >= summary_.kv_heads) return {};
  return {layer, head};
}

QString LayerHeadOverview::describe(const Cell& cell) const {
  const size_t l = static_cast<size_t>(cell.layer);
  QString text = tr("layer %1, kv head %2: max |%3| %4 over %5 rows")
                     .arg(cell.layer)
                     .arg(summary_.first_kv_head + cell.head)
                     .arg(values_ ? QStringLiteral("V") : QStringLiteral("K"))
                     .arg(static_cast<double>(summary_.maxAbs(cell.layer, cell.head)), 0, 'g', 3)
                     .arg(summary_.rows[l]);
  if (summary_.bad_rows[l] > 0) {
    text += tr("; %1 rows break the bookkeeping (worst: %2)")
                .arg(summary_.bad_rows[l])
                .arg(QString::fromUtf8(rowStateName(summary_.worst[l])));
  }
  return text + tr("\nclick: show this layer and head");
}

void LayerHeadOverview::paintLabels(QPainter& painter, double h) {
  painter.setPen(palette().color(QPalette::WindowText));
  painter.setFont(labelFont());
  const int line = QFontMetrics(labelFont()).height();
  painter.drawText(QRect(cellsLeft(), 0, width() - cellsLeft(), top() - 1), Qt::AlignLeft | Qt::AlignBottom,
                   values_ ? QStringLiteral("|V|") : QStringLiteral("|K|"));
  const int every = std::max(1, static_cast<int>(std::ceil(line / std::max(h, 0.1))));  // labels a line apart at least
  for (int l = 0; l < summary_.layers; ++l) {
    if (l % every != 0 && l != layer_) continue;
    const int y = top() + static_cast<int>((l + 0.5) * h);
    painter.drawText(QRect(0, y - line / 2, labelWidth() - 1, line), Qt::AlignRight | Qt::AlignVCenter, QString::number(l));
  }
}

void LayerHeadOverview::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  const double h = cellHeight();
  if (h <= 0) return;
  for (int l = 0; l < summary_.layers; ++l) {
    for (int k = 0; k < summary_.kv_heads; ++k) painter.fillRect(cellRect(l, k), shade(summary_.maxAbs(l, k), largest_));
    if (summary_.bad_rows[static_cast<size_t>(l)] > 0) {
      const QRect cell = cellRect(l, 0);
      painter.fillRect(QRect(labelWidth(), cell.top(), kStripeWidth, cell.height()),
                       Palette::rowState(summary_.worst[static_cast<size_t>(l)]));
    }
  }
  paintLabels(painter, h);
  const QRect cursor = cellRect(layer_, head_);
  if (!cursor.isEmpty()) {
    painter.setPen(QPen(Palette::selection(), 2));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(cursor.adjusted(1, 0, -1, 0));
  }
}

void LayerHeadOverview::mousePressEvent(QMouseEvent* event) {
  const Cell cell = cellAt(event->position().toPoint());
  if (cell.layer >= 0 && event->button() == Qt::LeftButton) emit cellClicked(cell.layer, cell.head);
}

bool LayerHeadOverview::event(QEvent* event) {
  if (event->type() == QEvent::FontChange) updateGeometry();  // the label column's width follows the font
  if (event->type() != QEvent::ToolTip) return QWidget::event(event);
  auto* help = static_cast<QHelpEvent*>(event);
  const Cell cell = cellAt(help->pos());
  if (cell.layer >= 0) QToolTip::showText(help->globalPos(), describe(cell), this);
  else QToolTip::showText(help->globalPos(), tr("layer x kv head: shade = max |K| (or |V|) of the rows held at the "
                                                "cursor; a coloured stripe = rows that break the bookkeeping; click a "
                                                "cell to show that layer and head"), this);
  return true;
}

}  // namespace kvscope::ui
