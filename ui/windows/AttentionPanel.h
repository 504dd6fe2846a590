#pragma once
// The verify pass of the cursor round: attention of the cursor's layer and a
// query head of the cursor's kv head, the gamma + 1 query rows over the keys
// the model actually attended to: the target cache's physical rows at that
// verify (each layer may hold a different number), labelled with the token
// and the position each row was written for. The mask drawn is the mask the
// model applied (masked cells grey, its edge outlined); rows that break the
// bookkeeping (stale, duplicate, wrong position) are hatched in their
// verdict's colour. Accepted, rejected and bonus query rows are marked.
#include <QStringList>
#include <QVector>

#include "ui/windows/ViewerPanel.h"

class QComboBox;
class QCustomPlot;
class QCPColorMap;
class QLabel;
class QMouseEvent;

namespace kvscope::ui {

// One key of the shown layer: a physical row of the target cache at verify.
struct AttentionKey {
  int64_t row = 0;
  int64_t entry = -1;  // -1: the event log has no row here (should not happen)
  int64_t position = -1;
  int64_t rope_position = -1;
  int64_t token = -1;
  RowState state = RowState::Ok;
  // The policy Evict event (index into snapshot.events) that masked this row
  // for the shown kv head; -1 while the head reads it. A masked key's column
  // is white (weight 0), which alone reads as "no attention".
  int64_t masked_by = -1;
  QString label;
};

class AttentionPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit AttentionPanel(DebuggerContext& context, QWidget* parent = nullptr);
  QCustomPlot* plot() const { return plot_; }
  int queryRows() const { return queries_; }
  int keyCount() const { return static_cast<int>(keys_.size()); }
  const QVector<AttentionKey>& keys() const { return keys_; }
  // The drawn weight (NaN where the model's mask hid the key).
  double cell(int query, int key) const;
  int layer() const { return layer_; }
  int kvHead() const { return kv_head_; }
  int queryHead() const { return query_head_; }
  void setQueryHead(int head);  // keeps the shared kv head in step
  QString csv() const;  // query rows x keys of the shown layer/head (masked cells empty)
  // The query rows' labels as drawn (the left axis's ticks, thinned to the
  // rows' height so no two overlap): the rectangle of each, in plot pixels.
  QList<QRect> queryLabelRects() const;

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void refresh() override;

 private:
  bool showEmpty(const SessionSnapshot* snapshot, const Cursor& cursor);
  void updateSelectors(const AttentionData& attention, const Cursor& cursor);
  void collectKeys(const SessionSnapshot& snapshot, const AttentionData& attention, int64_t round);
  void fillMap(const AttentionData& attention);
  void drawMaskEdge(const AttentionData& attention);
  void drawKeyMarks(const Cursor& cursor);
  void drawQueryMarks(const SessionSnapshot& snapshot, const Cursor& cursor);
  void drawKeyLabels();
  // Names every k-th query row, k chosen so labels one font-height tall do
  // not overlap at the rows' current pixel height; the rejected row is always named.
  void thinQueryLabels();
  // The longest form of the header's text that fits (the whole sentence in the tooltip).
  void fitInfo();
  // The x axis's title, the longest of its forms that fits under the plot (a narrow stage cuts a long one at both ends).
  void fitKeyAxisLabel();
  void describe(const AttentionData& attention, int64_t round);
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);
  int keyAt(double x) const;

  QComboBox* layer_box_;
  QComboBox* head_box_;
  QLabel* info_;
  QCustomPlot* plot_;
  QStringList info_forms_;  // the header's text, longest first
  QCPColorMap* map_;
  QVector<AttentionKey> keys_;
  bool has_mask_ = true;
  bool mask_outlined_ = true;  // false: the mask had too many edges to draw (drawMaskEdge)
  int queries_ = 0;
  int layer_ = 0;
  int kv_head_ = 0;
  int query_head_ = 0;
  int group_ = 1;  // query heads per kv head
  int64_t shown_round_ = -1;
  int64_t first_query_position_ = 0;
  QStringList query_labels_;  // one per query row (drawQueryMarks)
  int must_name_ = -1;        // the query row always labelled (the first rejected draft)
  int label_step_ = 0;        // thinQueryLabels' last step
};

}  // namespace kvscope::ui
