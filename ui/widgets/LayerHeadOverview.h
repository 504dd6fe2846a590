#pragma once
// The layer x kv head overview beside a cache heatmap: one cell per (layer,
// kv head), layer 0 at the top, shaded by the largest |K| (or |V|) the
// layer holds at the cursor (white: small, dark: the largest of the cache),
// a stripe left of each layer in the verdict colour when some of its rows
// break the bookkeeping, and the cursor's layer and head outlined. Scales to
// 32+ layers where a combo box does not: a faulty layer stands out, and a
// click on a cell moves the cursor to that layer and head.
#include <QWidget>

#include "ui/context/LayerSummary.h"

namespace kvscope::ui {

class LayerHeadOverview : public QWidget {
  Q_OBJECT
 public:
  explicit LayerHeadOverview(QWidget* parent = nullptr);

  void show(LayerSummary summary, int layer, int head, bool values);
  // Moves the cursor's outline only (the summary stays).
  void select(int layer, int head);
  void clear();
  const LayerSummary& summary() const { return summary_; }
  // Where a cell is drawn (tests click it); empty when there is none.
  QRect cellRect(int layer, int head) const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  // The layer numbers' and the header's font: a share of the widget's, so it follows the presenter zoom.
  QFont labelFont() const;

 signals:
  void cellClicked(int layer, int head);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;

 private:
  struct Cell {
    int layer = -1;
    int head = -1;
  };
  Cell cellAt(const QPoint& point) const;
  double cellHeight() const;
  int cellsLeft() const;
  int top() const;          // above the cells: the header
  int labelWidth() const;   // left of the cells: the layer numbers
  QString describe(const Cell& cell) const;
  void paintLabels(class QPainter& painter, double height);

  LayerSummary summary_;
  float largest_ = 0;
  int layer_ = 0, head_ = 0;
  bool values_ = false;
};

}  // namespace kvscope::ui
