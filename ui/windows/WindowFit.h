#pragma once
// The main window on the screen it is on: a restored geometry (saved on
// another, larger screen) put back inside the current one, no smaller than
// 1024x768 (or the whole screen when the screen is smaller, as a 1280x720
// projector is).
#include <QRect>
#include <QSize>

class QWidget;

namespace kvscope::ui {

constexpr QSize kMinimumWindowSize(1024, 768);

// kMinimumWindowSize, bounded by the screen's available size (when known).
QSize minimumWindowSize(const QSize& available);
// `geometry` moved and shrunk to lie inside `available`, never below `minimum`
// (bounded by `available`). An invalid `available` leaves it as it is.
QRect clampToScreen(const QRect& geometry, const QRect& available, const QSize& minimum = kMinimumWindowSize);
// clampToScreen for `window` on its screen.
void fitToScreen(QWidget* window);

}  // namespace kvscope::ui
