#pragma once
// One cache (target or drafter) at the cursor: a K or V heatmap of one layer
// and kv head, rows = the entries visible at (round, phase) ordered by
// position, columns = head_dim. A status column on the left marks rows
// written this round (green) and pruned this round (red, and hatched across
// the row: they stay visible in the round they die). Hover shows the value
// under the mouse; clicking a row selects that entry.
#include <QWidget>
#include <vector>

#include "core/trace/snapshot.h"
#include "ui/context/Cursor.h"
#include "ui/widgets/ColorRange.h"

class QCheckBox;
class QComboBox;
class QStackedWidget;
class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QLabel;
class QMouseEvent;

namespace kvscope::ui {

class KvHeadGrid;

class KvHeatmapView : public QWidget {
  Q_OBJECT
 public:
  KvHeatmapView(CacheRole role, QWidget* parent = nullptr);

  CacheRole role() const { return role_; }
  // Rebuilds the heatmap (synchronously; the panel coalesces calls).
  // Keeps the snapshot alive for hover and click until the next show().
  void show(std::shared_ptr<const SessionSnapshot> snapshot, const Cursor& cursor, bool values, const ColorRange& range);
  int layer() const;
  int head() const;
  void setLayerHead(int layer, int head);

  // What is drawn (tests, benchmarks).
  const CacheMatrix& matrix() const { return matrix_; }
  int rowCount() const { return static_cast<int>(matrix_.entry_indices.size()); }
  int countStatus(RowStatus status) const;
  QCustomPlot* plot() const { return plot_; }
  KvHeadGrid* headGrid() const { return grid_; }
  void setAllHeads(bool all);
  bool allHeads() const;
  double shownLower() const { return shown_lower_; }
  double shownUpper() const { return shown_upper_; }
  // The matrix shown, one row per entry: position, token, status, life, values.
  QString csv() const;

 signals:
  void entryClicked(qint64 entry_index);
  void selectorsChanged();
  void hoverText(const QString& text);

 private:
  void updateSelectors(const SessionSnapshot* snapshot);
  int rowAt(double y) const;
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);

  CacheRole role_;
  QComboBox* layer_box_;
  QComboBox* head_box_;
  QCheckBox* all_heads_;
  QStackedWidget* stack_;
  KvHeadGrid* grid_;
  QLabel* title_;
  QCustomPlot* plot_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  std::shared_ptr<const SessionSnapshot> snapshot_;
  CacheMatrix matrix_;
  bool values_ = false;
  double shown_lower_ = 0, shown_upper_ = 0;
  int layers_shown_ = -1, heads_shown_ = -1;
};

}  // namespace kvscope::ui
