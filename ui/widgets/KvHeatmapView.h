#pragma once
// One cache (target or drafter) at the cursor: a K or V heatmap of the
// cursor's layer and kv head, one line per physical row in row order (then
// the rows removed this round, faded), columns = head_dim. Rows are labelled
// by identity (row, the position it was written for, its token) when they
// are tall enough, else by a row number every few rows; status columns on
// the left mark rows written this round (green), removed this round (red),
// and rows whose identity breaks the bookkeeping (the verdict's colour:
// stale, duplicate, wrong position); a missing row is a dashed line at the
// slot it belongs in. Rows an eviction policy masked in the shown kv head
// are greyed and cross-hatched (legend: "evicted (policy)").
//
// Real caches have thousands of rows: the wheel zooms around the pointer
// (rows; Ctrl+wheel: dims), a drag pans, Fit (F, Home) shows everything,
// and when more rows are in view than pixel lines, each line shows a bin of
// rows (RowBins: the value of largest |x|, marks of any row in it). The zoom
// is kept across cursor moves; a selection made elsewhere is scrolled into
// view. Beside the heatmap, the layer x head overview picks layer and head.
//
// The target view also marks the attention focus (ui/context/AttentionFocus.h)
// when it shows the focus's layer and kv head: an outline around the rows the
// explained query reads, its own row in another colour, and the rows ticked
// in the what-if box dashed.
#include <QWidget>
#include <vector>

#include "core/snapshot/snapshot.h"
#include "ui/context/AttentionFocus.h"
#include "ui/context/Cursor.h"
#include "ui/widgets/ColorRange.h"
#include "ui/widgets/HeatmapViewport.h"
#include "ui/widgets/RowBins.h"

class QAction;
class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QStackedWidget;
class QCustomPlot;
class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QLabel;
class QMouseEvent;
class QTimer;
class QToolButton;
class QWheelEvent;

namespace kvscope::ui {

class KvHeadGrid;
class LayerHeadOverview;

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

  // Zoom and pan (the mouse does the same; each redraws at once).
  void fit();
  void zoomRows(double factor, double anchor_row);
  void panRows(double rows);
  void setVisibleRows(double lower, double upper);
  const HeatmapViewport& viewport() const { return viewport_; }
  // How the rows in view are drawn: one line per bin of rows.
  const RowBinning& binning() const { return binning_; }
  // The verdict mark drawn on the line holding `row` (Ok: none; not in view: Ok).
  RowState shownState(int row) const;
  QAction* fitAction() const { return fit_action_; }

  // The rows the explained query reads (drawn at once; the focus is kept
  // across show()). Marked only in the target view at the focus's layer and
  // kv head, on rows the cache holds (not the rows removed this round).
  void setAttentionFocus(const AttentionFocus& focus);
  // View rows (indices into matrix().rows) marked: every key row, the
  // query's own row, the ticked rows. Empty when nothing is marked here.
  const std::vector<int>& focusKeyRows() const { return focus_key_rows_; }
  const std::vector<int>& focusQueryRows() const { return focus_query_rows_; }
  const std::vector<int>& focusTickedRows() const { return focus_ticked_rows_; }

  // What is drawn (tests, benchmarks).
  const CacheMatrix& matrix() const { return matrix_; }
  int rowCount() const { return static_cast<int>(matrix_.rows.size()); }
  int countStatus(RowStatus status) const;
  // Rows of the shown kv head an eviction policy masked (drawn grey, cross-hatched).
  int countMasked() const;
  int countState(RowState state) const;
  const std::vector<RowVerdict>& missing() const { return missing_; }
  QCustomPlot* plot() const { return plot_; }
  QComboBox* layerBox() const { return layer_box_; }
  QComboBox* headBox() const { return head_box_; }
  KvHeadGrid* headGrid() const { return grid_; }
  // Its summary follows the heatmap on the next event-loop turn.
  LayerHeadOverview* overview() const { return overview_; }
  void setAllHeads(bool all);
  bool allHeads() const;
  double shownLower() const { return shown_lower_; }
  double shownUpper() const { return shown_upper_; }
  // The matrix shown, one line per row: row, position, rotary position, token, status, verdict, life, values.
  QString csv() const;
  // The title's text as shown (counts of rows, evictions, the focused query's reads).
  QString title() const;

 signals:
  void entryClicked(qint64 entry_index);
  // The user picked a layer or head in this view's boxes or overview.
  void layerHeadPicked(kvscope::CacheRole cache, int layer, int head);
  void allHeadsToggled();
  void hoverText(const QString& text);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QString maskedText() const;  // the title's words on masked rows (empty: none)
  QHBoxLayout* buildHeader();
  void buildPlot();
  void updateSelectors(const SessionSnapshot* snapshot, const Cursor& cursor);
  // The layer x head summary, computed a moment after the heatmap (coalesced).
  void updateOverview();
  void updateTitle();
  // Draws the viewport: bins, marks, labels, ranges (no data rebuilt).
  void redraw();
  int plotPixels();
  void drawSelection(const SessionSnapshot& snapshot);
  void updateFocusRows();
  void drawFocus();
  QString rangeText() const;
  void drawLabels(const SessionSnapshot& snapshot);
  void drawBinLabels(const SessionSnapshot& snapshot, int pixels);
  void setColorRange(const ColorRange& range);
  // The view's line for the cursor's selection (-1: none here).
  int selectedRow(const Cursor& cursor) const;
  void followCursor(const Cursor& cursor);
  int rowAt(double y) const;
  QString hoverFor(int row, int col) const;
  // " · EVICTED in kv head 1 by policy h2o at round 0 (prefill), score 0.012", or empty.
  QString evictionText(const ViewRow& row) const;
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);
  void onMouseRelease(QMouseEvent* event);
  void onWheel(QWheelEvent* event, QCPAxisRect* rect);
  // The axis rect under a point of `source` (the single plot or a small multiple).
  QCPAxisRect* axisRectAt(QCustomPlot* source, const QPointF& pos) const;

  CacheRole role_;
  QComboBox* layer_box_;
  QComboBox* head_box_;
  QCheckBox* all_heads_;
  QToolButton* fit_button_;
  QAction* fit_action_;
  QStackedWidget* stack_;
  KvHeadGrid* grid_;
  LayerHeadOverview* overview_;
  QTimer* summary_timer_;
  QLabel* title_;
  QCustomPlot* plot_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  std::shared_ptr<const SessionSnapshot> snapshot_;
  Cursor cursor_;
  CacheMatrix matrix_;
  std::vector<RowVerdict> missing_;
  HeatmapViewport viewport_;
  RowBinning binning_;
  std::vector<BinMarks> marks_;
  AttentionFocus focus_;
  std::vector<int> focus_key_rows_, focus_query_rows_, focus_ticked_rows_;
  int pixels_ = 0;  // pixel lines the bins were made for
  bool values_ = false;
  int layer_ = 0, head_ = 0;
  double shown_lower_ = 0, shown_upper_ = 0;
  // The overview is recomputed only when what it summarises changes.
  const SessionSnapshot* summary_snapshot_ = nullptr;
  Moment summary_moment_{-1, Phase::Prefill};
  bool summary_values_ = false;
  // A press starts a drag (pan) or, released in place, a click (select).
  QCustomPlot* drag_plot_ = nullptr;
  QCPAxisRect* drag_rect_ = nullptr;
  QPointF drag_from_;
  AxisSpan drag_rows_, drag_cols_;
  bool dragging_ = false;
};

}  // namespace kvscope::ui
