#pragma once
// Drawing a cache matrix through its row bins into QCustomPlot, shared by
// the single heatmap (KvHeatmapView) and the small multiples (KvHeadGrid):
// the colour map holds one line per bin of the rows in view (so a 2,000-row
// cache on 500 pixels drops no row, and the image stays small), and the
// status columns left of dim 0 mark bins holding written, removed or wrong
// rows, and grey cross-hatching marks rows an eviction policy masked in the
// shown kv head. Consecutive bins with the same marks share one item (few items to
// draw even when a whole prefill is "written this round").
#include <vector>

#include "core/snapshot/snapshot.h"
#include "ui/widgets/RowBins.h"

class QCPAxis;
class QCPAxisRect;
class QCPColorMap;
class QCustomPlot;

namespace kvscope::ui {

// The status columns, left of dim 0 (x coordinates).
struct StatusColumns {
  static constexpr double kState = -3.6;    // verdict colour (stale, duplicate, ...)
  static constexpr double kWritten = -2.7;  // written this round
  static constexpr double kPruned = -1.8;   // removed this round
  static constexpr double kEnd = -0.9;
  static constexpr double kLeftEdge = -3.8;  // the x range starts here
};

// Fills `map` with one line per bin (values from binValues) placed on the bins' rows.
void fillBinnedMap(QCPColorMap* map, const CacheMatrix& matrix, const RowBinning& binning);
// The marks of every bin (status columns, hatching of wrong and removed
// rows) as items on `rect`'s bottom and left axes, clipped to it.
void drawBinMarks(QCustomPlot* plot, QCPAxisRect* rect, const RowBinning& binning, const std::vector<BinMarks>& marks,
                  int cols);

}  // namespace kvscope::ui
