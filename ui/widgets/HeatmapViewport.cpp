#include "ui/widgets/HeatmapViewport.h"

#include <algorithm>

namespace kvscope::ui {

AxisSpan HeatmapViewport::fullRows() const { return {-0.5, std::max(row_count_, 1) - 0.5}; }

void HeatmapViewport::setExtent(int rows, double col_lower, double col_upper) {
  row_count_ = std::max(rows, 0);
  col_lower_ = col_lower;
  col_upper_ = std::max(col_upper, col_lower + 1);
  rows_ = fitted_rows_ ? fullRows() : clamped(rows_, fullRows());
  cols_ = fitted_cols_ ? fullCols() : clamped(cols_, fullCols());
}

void HeatmapViewport::fit() {
  fitted_rows_ = fitted_cols_ = true;
  rows_ = fullRows();
  cols_ = fullCols();
}

AxisSpan HeatmapViewport::clamped(AxisSpan span, const AxisSpan& full) {
  const double size = std::min(span.size(), full.size());
  if (span.lower < full.lower) span = {full.lower, full.lower + size};
  if (span.upper > full.upper) span = {full.upper - size, full.upper};
  return span;
}

AxisSpan HeatmapViewport::zoomed(const AxisSpan& span, double factor, double anchor, double min_size,
                                 const AxisSpan& full) {
  const double size = std::clamp(span.size() * factor, std::min(min_size, full.size()), full.size());
  const double scale = size / span.size();
  // The anchor keeps its place: its distance to either edge scales with the span.
  return clamped({anchor - (anchor - span.lower) * scale, anchor + (span.upper - anchor) * scale}, full);
}

void HeatmapViewport::zoomRows(double factor, double anchor) {
  rows_ = zoomed(rows_, factor, anchor, kMinRows, fullRows());
  fitted_rows_ = rows_.size() >= fullRows().size();
}

void HeatmapViewport::zoomCols(double factor, double anchor) {
  cols_ = zoomed(cols_, factor, anchor, kMinCols, fullCols());
  fitted_cols_ = cols_.size() >= fullCols().size();
}

void HeatmapViewport::panRows(double delta) { rows_ = clamped({rows_.lower + delta, rows_.upper + delta}, fullRows()); }

void HeatmapViewport::panCols(double delta) { cols_ = clamped({cols_.lower + delta, cols_.upper + delta}, fullCols()); }

void HeatmapViewport::setRows(double lower, double upper) {
  rows_ = clamped({lower, std::max(upper, lower + std::min(kMinRows, fullRows().size()))}, fullRows());
  fitted_rows_ = rows_.size() >= fullRows().size();
}

bool HeatmapViewport::showRow(int row) {
  if (row < 0 || row >= row_count_) return false;
  const double margin = std::min(2.0, rows_.size() / 4);  // a couple of neighbours stay in view
  if (row - 0.5 >= rows_.lower + margin && row + 0.5 <= rows_.upper - margin) return false;
  const double half = rows_.size() / 2;
  rows_ = clamped({row - half, row + half}, fullRows());  // centred: the row and its context
  return true;
}

}  // namespace kvscope::ui
