#pragma once
// The part of a cache heatmap in view: a row range and a column range in
// plot coordinates (row r spans r - 0.5 .. r + 0.5). Zoom keeps the point
// under the mouse still, pan moves by whole coordinates, and everything is
// clamped to the matrix. A fitted viewport shows every row and follows the
// cache as it grows or shrinks; a zoomed one keeps its rows across cursor
// moves (clamped when the cache shrinks under it). Plain C++: no widgets.
namespace kvscope::ui {

struct AxisSpan {
  double lower = 0, upper = 1;
  double size() const { return upper - lower; }
};

class HeatmapViewport {
 public:
  // The whole matrix: rows [0, rows) and columns from col_lower to col_upper
  // (the status columns left of dim 0 included).
  void setExtent(int rows, double col_lower, double col_upper);
  void fit();
  bool fitted() const { return fitted_rows_ && fitted_cols_; }

  // factor < 1 zooms in, > 1 out, around `anchor` (a coordinate that stays put).
  void zoomRows(double factor, double anchor);
  void zoomCols(double factor, double anchor);
  void panRows(double delta);
  void panCols(double delta);
  void setRows(double lower, double upper);
  // Scrolls, keeping the zoom, so `row` is inside the range with a little
  // context around it. False when it already was (or the row does not exist).
  bool showRow(int row);

  const AxisSpan& rows() const { return rows_; }
  const AxisSpan& cols() const { return cols_; }
  AxisSpan fullRows() const;
  AxisSpan fullCols() const { return {col_lower_, col_upper_}; }
  int rowCount() const { return row_count_; }

  static constexpr double kMinRows = 3;  // zooming in stops at three rows in view
  static constexpr double kMinCols = 4;

 private:
  static AxisSpan zoomed(const AxisSpan& span, double factor, double anchor, double min_size, const AxisSpan& full);
  static AxisSpan clamped(AxisSpan span, const AxisSpan& full);

  int row_count_ = 0;
  double col_lower_ = 0, col_upper_ = 1;
  AxisSpan rows_{-0.5, 0.5};
  AxisSpan cols_{0, 1};
  bool fitted_rows_ = true;
  bool fitted_cols_ = true;
};

}  // namespace kvscope::ui
