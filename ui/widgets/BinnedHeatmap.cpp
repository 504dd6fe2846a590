#include "ui/widgets/BinnedHeatmap.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <qcustomplot.h>

#include "ui/widgets/Palette.h"

namespace kvscope::ui {

namespace {

// The coordinate span of `count` cells of `per_cell` units starting at `first`,
// as QCPColorMapData wants it: cell centres, or the cell's edges for one cell
// (a one-cell map is drawn exactly over its data range).
QCPRange cellRange(int first, int count, int per_cell) {
  if (count <= 1) return QCPRange(first - 0.5, first + per_cell - 0.5);
  const double centre = first + (per_cell - 1) / 2.0;
  return QCPRange(centre, centre + static_cast<double>(count - 1) * per_cell);
}

// Calls draw(first_bin, end_bin, value) for each run of consecutive bins
// with the same non-zero value of `key`.
void forEachRun(int bins, const std::function<int(int)>& key, const std::function<void(int, int, int)>& draw) {
  for (int b = 0; b < bins;) {
    const int value = key(b);
    int end = b + 1;
    while (end < bins && key(end) == value) ++end;
    if (value != 0) draw(b, end, value);
    b = end;
  }
}

void addRect(QCustomPlot* plot, QCPAxisRect* rect, double left, double top, double right, double bottom,
             const QPen& pen, const QBrush& brush) {
  auto* item = new QCPItemRect(plot);
  item->setClipAxisRect(rect);
  for (QCPItemPosition* corner : {item->topLeft, item->bottomRight}) {
    corner->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
  }
  item->topLeft->setCoords(left, top);
  item->bottomRight->setCoords(right, bottom);
  item->setPen(pen);
  item->setBrush(brush);
}

}  // namespace

void fillBinnedMap(QCPColorMap* map, const CacheMatrix& matrix, const RowBinning& binning) {
  const int cols = static_cast<int>(matrix.cols);
  QCPColorMapData* data = map->data();
  if (binning.bins == 0 || cols == 0) {
    data->setSize(1, 1);
    data->fill(std::nan(""));
    return;
  }
  const std::vector<float> lines = binValues(matrix, binning);
  data->setSize(cols, binning.bins);
  data->setRange(cellRange(0, cols, 1), cellRange(binning.first_row, binning.bins, binning.rows_per_bin));
  for (int b = 0; b < binning.bins; ++b) {
    for (int c = 0; c < cols; ++c) data->setCell(c, b, lines[static_cast<size_t>(b * cols + c)]);
  }
}

void drawBinMarks(QCustomPlot* plot, QCPAxisRect* rect, const RowBinning& binning, const std::vector<BinMarks>& marks,
                  int cols) {
  const auto bottom = [&](int end_bin) { return binning.binEnd(end_bin - 1) - 0.5; };
  // A run is at least one full line tall: the short last bin of a cache
  // (e.g. 5 rows where lines hold 8) would otherwise be drawn under a pixel.
  int run_end = 0;
  const auto top = [&](int bin) {
    return std::min(binning.binFirst(bin) - 0.5, bottom(run_end) - binning.rows_per_bin);
  };
  const auto mark = [&](int b) -> const BinMarks& { return marks[static_cast<size_t>(b)]; };
  // Wrong rows: the verdict's colour in the first column, and the row hatched in it.
  forEachRun(binning.bins, [&](int b) { return static_cast<int>(mark(b).state); }, [&](int first, int end, int state) {
    run_end = end;
    const QColor color = Palette::rowState(static_cast<RowState>(state));
    addRect(plot, rect, StatusColumns::kState, top(first), StatusColumns::kWritten, bottom(end), Qt::NoPen, color);
    addRect(plot, rect, -0.5, top(first), cols - 0.5, bottom(end), QPen(color, 1.5), QBrush(color, Qt::BDiagPattern));
  });
  forEachRun(binning.bins, [&](int b) { return mark(b).written ? 1 : 0; }, [&](int first, int end, int) {
    run_end = end;
    addRect(plot, rect, StatusColumns::kWritten, top(first), StatusColumns::kPruned, bottom(end), Qt::NoPen,
            Palette::written());
  });
  // Rows a policy masked in this kv head: greyed and cross-hatched (they stay
  // in the cache, unread); a bin where only some are masked is hatched only.
  forEachRun(binning.bins, [&](int b) { return mark(b).masked == 0 ? 0 : mark(b).masked == mark(b).rows ? 2 : 1; },
             [&](int first, int end, int all) {
               run_end = end;
               const QColor grey = Palette::evicted();
               if (all == 2) addRect(plot, rect, -0.5, top(first), cols - 0.5, bottom(end), Qt::NoPen, QColor(150, 150, 150, 170));
               addRect(plot, rect, -0.5, top(first), cols - 0.5, bottom(end), QPen(grey, 1), QBrush(grey, Qt::DiagCrossPattern));
             });
  // Removed rows: red in the last column, the values faded.
  forEachRun(binning.bins, [&](int b) { return mark(b).pruned ? 1 : 0; }, [&](int first, int end, int) {
    run_end = end;
    addRect(plot, rect, StatusColumns::kPruned, top(first), StatusColumns::kEnd, bottom(end), Qt::NoPen,
            Palette::pruned());
    addRect(plot, rect, -0.5, top(first), cols - 0.5, bottom(end), QPen(Palette::pruned(), 1),
            QColor(255, 255, 255, 150));
  });
}

}  // namespace kvscope::ui
