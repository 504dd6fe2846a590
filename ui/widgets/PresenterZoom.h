#pragma once
// Presenter zoom: scales the fonts of a window and everything in it (widget
// text, plot axes and tick labels, colour-scale axes, legends, scatter
// markers) so the back of a classroom can read them. Each object's size at
// 100% is kept in a property the first time it is zoomed, so zooming is
// repeatable and 100% gives back exactly what was there.
class QWidget;

namespace kvscope::ui {

constexpr int kMinPresenterZoom = 100;
constexpr int kMaxPresenterZoom = 200;

// Zooms `window` and its children to `percent` (clamped to 100..200).
void applyPresenterZoom(QWidget* window, int percent);
// The zoom last applied to `window` (100 when never).
int presenterZoom(const QWidget* window);

}  // namespace kvscope::ui
