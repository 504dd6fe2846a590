#include "ui/windows/WindowFit.h"

#include <QScreen>
#include <QWidget>
#include <algorithm>

namespace kvscope::ui {

QSize minimumWindowSize(const QSize& available) {
  return available.isValid() && !available.isEmpty() ? kMinimumWindowSize.boundedTo(available) : kMinimumWindowSize;
}

QRect clampToScreen(const QRect& geometry, const QRect& available, const QSize& minimum) {
  if (!available.isValid() || available.isEmpty()) return geometry;
  const QSize floor = minimum.boundedTo(available.size());
  const QSize size = geometry.size().boundedTo(available.size()).expandedTo(floor);
  const int x = std::clamp(geometry.x(), available.left(), available.right() + 1 - size.width());
  const int y = std::clamp(geometry.y(), available.top(), available.bottom() + 1 - size.height());
  return QRect(QPoint(x, y), size);
}

void fitToScreen(QWidget* window) {
  const QScreen* screen = window->screen();
  const QRect available = screen ? screen->availableGeometry() : QRect();
  window->setMinimumSize(minimumWindowSize(available.size()));
  if (window->isMaximized() || window->isFullScreen()) return;
  const QRect clamped = clampToScreen(window->geometry(), available, window->minimumSize());
  if (clamped != window->geometry()) window->setGeometry(clamped);
}

}  // namespace kvscope::ui
