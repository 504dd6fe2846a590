#pragma once
// One cache (target or drafter) at the cursor: a K or V heatmap of the
// cursor's layer and kv head, one line per physical row in row order (then
// the rows removed this round, faded), columns = head_dim. Rows are labelled
// by identity (row, the position it was written for, its token); status
// columns on the left mark rows written this round (green), removed this
// round (red), and rows whose identity breaks the bookkeeping (the verdict's
// colour: stale, duplicate, wrong position); a missing row is a dashed line
// at the slot it belongs in. The layer and head pickers edit the cursor.
#include <QWidget>
#include <vector>

#include "core/inspect/snapshot.h"
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
  // The layer and kv head shown (the cursor's, clamped to this cache).
  int layer() const { return layer_; }
  int head() const { return head_; }

  // What is drawn (tests, benchmarks).
  const CacheMatrix& matrix() const { return matrix_; }
  int rowCount() const { return static_cast<int>(matrix_.rows.size()); }
  int countStatus(RowStatus status) const;
  int countState(RowState state) const;
  const std::vector<RowVerdict>& missing() const { return missing_; }
  QCustomPlot* plot() const { return plot_; }
  QComboBox* layerBox() const { return layer_box_; }
  QComboBox* headBox() const { return head_box_; }
  KvHeadGrid* headGrid() const { return grid_; }
  void setAllHeads(bool all);
  bool allHeads() const;
  double shownLower() const { return shown_lower_; }
  double shownUpper() const { return shown_upper_; }
  // The matrix shown, one line per row: row, position, rotary position, token, status, verdict, life, values.
  QString csv() const;

 signals:
  void entryClicked(qint64 entry_index);
  // The user picked a layer or head in this view's boxes.
  void layerHeadPicked(kvscope::CacheRole cache, int layer, int head);
  void allHeadsToggled();
  void hoverText(const QString& text);

 private:
  void updateSelectors(const SessionSnapshot* snapshot, const Cursor& cursor);
  void drawMarks(const SessionSnapshot& snapshot, const Cursor& cursor);
  void drawLabels(const SessionSnapshot& snapshot);
  void fillMap(const ColorRange& range);
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
  std::vector<RowVerdict> missing_;
  bool values_ = false;
  int layer_ = 0, head_ = 0;
  double shown_lower_ = 0, shown_upper_ = 0;
};

}  // namespace kvscope::ui
