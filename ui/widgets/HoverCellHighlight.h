#pragma once
// A laser pointer for heatmaps: the cell under the mouse gets a bright
// outline (presenter mode: the class sees which cell the teacher points at).
// Attach one to any QCustomPlot whose cells sit on whole coordinates; it
// survives the plot's clearItems() (the outline is made again when needed).
#include <QObject>
#include <QPointer>

class QCustomPlot;
class QCPItemRect;
class QMouseEvent;

namespace kvscope::ui {

class HoverCellHighlight : public QObject {
  Q_OBJECT
 public:
  explicit HoverCellHighlight(QCustomPlot* plot);
  // The outline (null before the first hover, or after the plot cleared its items).
  QCPItemRect* outline() const { return outline_; }
  bool shown() const;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void onMove(QMouseEvent* event);
  void hide();

  QCustomPlot* plot_;
  QPointer<QCPItemRect> outline_;
};

}  // namespace kvscope::ui
