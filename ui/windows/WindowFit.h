#pragma once
// The main window on the screen it is on: a minimum size at which every
// workspace still holds its panels (1024x720, or the whole screen when that is
// smaller), and a restored geometry (saved on another, larger screen) put back
// inside the current one. An explicit minimum also keeps presenter zoom from
// leaving the window wider than it was: the layout's own minimum lags the fonts.
#include <QRect>
#include <QSize>

class QWidget;

namespace kvscope::ui {

// 1024 wide, and 720 tall so that a 1280x720 projector's whole screen is allowed.
constexpr QSize kMinimumWindowSize(1024, 720);

// kMinimumWindowSize, bounded by the screen's available size (when known).
QSize minimumWindowSize(const QSize& available);
// `geometry` moved and shrunk to lie inside `available`, never below `minimum`
// (bounded by `available`). An invalid `available` leaves it as it is.
QRect clampToScreen(const QRect& geometry, const QRect& available, const QSize& minimum = kMinimumWindowSize);
// Both, for `window` on its screen.
void fitToScreen(QWidget* window);

}  // namespace kvscope::ui
