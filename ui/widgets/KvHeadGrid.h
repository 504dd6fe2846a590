#pragma once
// Small multiples: every kv head of one layer of one cache side by side, one
// heatmap each (rows = the physical rows at the cursor, columns = head_dim),
// sharing one colour range and the single heatmap's viewport (zoom and pan
// there, or here: the heads stay aligned row for row); written, removed and
// wrong rows marked, and rows binned per pixel line, as in the single heatmap.
#include <QWidget>
#include <vector>

#include "core/snapshot/snapshot.h"
#include "ui/context/Cursor.h"
#include "ui/widgets/ColorRange.h"
#include "ui/widgets/HeatmapViewport.h"
#include "ui/widgets/RowBins.h"

class QCustomPlot;

namespace kvscope::ui {

class KvHeadGrid : public QWidget {
  Q_OBJECT
 public:
  explicit KvHeadGrid(QWidget* parent = nullptr);
  // Rebuilds every head's matrix, then draws the viewport.
  void show(const SessionSnapshot* snapshot, const Cursor& cursor, CacheRole role, int layer, bool values,
            const ColorRange& range, const HeatmapViewport& viewport);
  // Draws another part of the same matrices (zoom, pan, resize).
  void setViewport(const HeatmapViewport& viewport);
  int headCount() const { return heads_; }
  QCustomPlot* plot() const { return plot_; }
  // How head `head`'s rows are drawn (tests).
  const RowBinning& binning(int head) const { return binnings_[static_cast<size_t>(head)]; }

 private:
  void drawHead(int head, int columns);

  QCustomPlot* plot_;
  int heads_ = 0;
  int first_head_ = 0;  // the model's number of head 0 (a tensor-parallel rank's first KV head)
  std::vector<CacheMatrix> matrices_;
  std::vector<RowBinning> binnings_;
  double lower_ = -1, upper_ = 1;  // the shared colour range
  HeatmapViewport viewport_;
};

}  // namespace kvscope::ui
