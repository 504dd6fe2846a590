#include "ui/widgets/TokenStripWidget.h"

#include <QContextMenuEvent>
#include <QHelpEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace kvscope::ui {

namespace {
constexpr int kPadX = 3;
constexpr int kPadY = 2;
constexpr int kGap = 2;
constexpr int kMargin = 4;
// A strip with this much height or more to itself (a lesson's stage, not a
// Debug dock) draws its tokens larger, up to kMaxScale, to use the room.
constexpr int kFillFrom = 300;
constexpr double kMaxScale = 3.0;
}  // namespace

QFont TokenStripWidget::stripFont(double scale) const {
  QFont large = font();
  if (large.pointSizeF() > 0) large.setPointSizeF(large.pointSizeF() * scale);
  else if (large.pixelSize() > 0) large.setPixelSize(static_cast<int>(large.pixelSize() * scale + 0.5));
  return large;
}

double TokenStripWidget::fitScale(int width) const {
  // The scroll area's viewport: its height does not depend on this strip's.
  const int room = parentWidget() ? parentWidget()->height() : height();
  if (room < kFillFrom) return 1.0;
  for (double scale = kMaxScale; scale > 1.0; scale -= 0.25) {
    if (layoutItems(width, nullptr, scale) <= room * 0.85) return scale;
  }
  return 1.0;
}

TokenStripWidget::TokenStripWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
}

void TokenStripWidget::setItems(QVector<TokenItem> items) {
  items_ = std::move(items);
  scale_ = fitScale(width());
  layoutItems(width(), &rects_, scale_);
  updateGeometry();
  update();
}

int TokenStripWidget::layoutItems(int width, QVector<QRect>* rects, double scale) const {
  const QFontMetrics metrics(stripFont(scale));
  const int line_height = metrics.height() + 2 * kPadY;
  int x = kMargin, y = kMargin;
  if (rects) rects->clear();
  for (const TokenItem& item : items_) {
    const int w = metrics.horizontalAdvance(item.text) + 2 * kPadX;
    if (x > kMargin && x + w > width - kMargin) {
      x = kMargin;
      y += line_height + kGap;
    }
    if (rects) rects->push_back(QRect(x, y, w, line_height));
    x += w + kGap;
  }
  return y + line_height + kMargin;
}

int TokenStripWidget::heightForWidth(int width) const { return layoutItems(width, nullptr, fitScale(width)); }

QSize TokenStripWidget::sizeHint() const { return QSize(400, heightForWidth(std::max(width(), 400))); }

void TokenStripWidget::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  scale_ = fitScale(width());
  layoutItems(width(), &rects_, scale_);
}

int TokenStripWidget::itemAt(const QPoint& point) const {
  for (int i = 0; i < rects_.size(); ++i) {
    if (rects_[i].contains(point)) return i;
  }
  return -1;
}

void TokenStripWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().base());
  painter.setFont(stripFont(scale_));
  for (int i = 0; i < items_.size() && i < rects_.size(); ++i) {
    const TokenItem& item = items_[i];
    const QRect r = rects_[i];
    painter.setPen(Qt::NoPen);
    painter.setBrush(item.background);
    painter.drawRoundedRect(r, 3, 3);
    if (item.pending) {
      painter.setPen(QPen(Qt::darkGray, 1, Qt::DashLine));
      painter.setBrush(Qt::NoBrush);
      painter.drawRoundedRect(r.adjusted(0, 0, -1, -1), 3, 3);
    }
    if (item.selected) {
      painter.setPen(QPen(QColor(255, 140, 0), 2));
      painter.setBrush(Qt::NoBrush);
      painter.drawRoundedRect(r.adjusted(1, 1, -1, -1), 3, 3);
    }
    painter.setPen(item.struck ? QColor(90, 0, 0) : Qt::black);
    painter.drawText(r.adjusted(kPadX, kPadY, -kPadX, -kPadY), Qt::AlignLeft | Qt::AlignVCenter, item.text);
    if (item.struck) {
      painter.setPen(QPen(QColor(120, 0, 0), 2));
      const int mid = r.center().y() + 1;
      painter.drawLine(r.left() + 1, mid, r.right() - 1, mid);
    }
  }
}

bool TokenStripWidget::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int index = itemAt(help->pos());
    if (index >= 0 && !items_[index].tooltip.isEmpty()) QToolTip::showText(help->globalPos(), items_[index].tooltip, this);
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

void TokenStripWidget::contextMenuEvent(QContextMenuEvent* event) {
  const int index = itemAt(event->pos());
  if (index < 0) return;
  auto* menu = new QMenu(this);
  menu->setAttribute(Qt::WA_DeleteOnClose);
  menu->addAction(tr("Copy token text"), this, [this, index] { emit copyTextRequested(index); });
  menu->popup(event->globalPos());
}

void TokenStripWidget::mousePressEvent(QMouseEvent* event) {
  const int index = itemAt(event->position().toPoint());
  if (index >= 0) emit positionClicked(items_[index].position);
}

}  // namespace kvscope::ui
