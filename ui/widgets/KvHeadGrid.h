#pragma once
// Small multiples: every kv head of one layer of one cache side by side, one
// heatmap each (rows = the physical rows at the cursor, columns = head_dim),
// sharing one colour range; written, removed and wrong rows marked as in the
// single heatmap.
#include <QWidget>

#include "core/inspect/snapshot.h"
#include "ui/context/Cursor.h"
#include "ui/widgets/ColorRange.h"

class QCustomPlot;

namespace kvscope::ui {

class KvHeadGrid : public QWidget {
  Q_OBJECT
 public:
  explicit KvHeadGrid(QWidget* parent = nullptr);
  void show(const SessionSnapshot* snapshot, const Cursor& cursor, CacheRole role, int layer, bool values,
            const ColorRange& range);
  int headCount() const { return heads_; }
  QCustomPlot* plot() const { return plot_; }

 private:
  QCustomPlot* plot_;
  int heads_ = 0;
};

}  // namespace kvscope::ui
