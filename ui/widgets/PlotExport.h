#pragma once
// Right-click menu on a plot: export it as PNG or PDF, and its data as CSV
// when a table is supplied.
#include <QString>
#include <functional>

class QCustomPlot;

namespace kvscope::ui {

// csv: builds the table's CSV text on demand (empty function: no CSV entry).
void installPlotExport(QCustomPlot* plot, const QString& base_name, std::function<QString()> csv = {});

// Writes the plot; the format follows the suffix (.png, .pdf). Returns false on failure.
bool exportPlot(QCustomPlot* plot, const QString& path);

}  // namespace kvscope::ui
