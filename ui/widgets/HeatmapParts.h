#pragma once
// Parts the Compression panel's heatmap views share: a selectable caption,
// a bare plot whose layout the view fills with its own axis rects, and a
// colour map on one of those rects.
#include <QString>
#include <cstdint>
#include <vector>

class QCPAxisRect;
class QCPColorGradient;
class QCPColorMap;
class QCPColorScale;
class QCustomPlot;
class QLabel;

namespace kvscope::ui {

// A word-wrapped caption the reader can select and copy from.
QLabel* makeCaption();
// A plot named `name` with an empty layout, the hover highlight of the cell under the mouse, and room for cells.
QCustomPlot* makeBarePlot(const QString& name);
// A map without interpolation on `rect`'s bottom and left axes, coloured by `gradient` (and `scale`, when given).
QCPColorMap* addColorMap(QCPAxisRect* rect, QCPColorScale* scale, const QCPColorGradient& gradient);
// A caption's text for a view with nothing to draw: "<b>slot label</b> why", escaped.
QString messageCaption(const QString& slot, const QString& label, const QString& why);
// The rows (value indices) whose first cell `map` draws fully transparent:
// what a view shows removed, read back from what it drew (tests).
std::vector<int64_t> transparentRows(const QCPColorMap* map);

}  // namespace kvscope::ui
