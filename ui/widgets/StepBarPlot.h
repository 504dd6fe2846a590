#pragma once
// A small bar plot for one step of the attention explanation: one series of
// values (the step's numbers) and optionally a second one beside it (after a
// "what if" edit), over channels or over key rows labelled by token.
// Key labels are thinned to the width, so they are never painted over each
// other; a NaN value draws no bar (a masked key).
#include <QStringList>
#include <QVector>
#include <qcustomplot.h>

namespace kvscope::ui {

class StepBarPlot : public QCustomPlot {
  Q_OBJECT
 public:
  explicit StepBarPlot(const QString& object_name, QWidget* parent = nullptr);
  static QColor beforeColor() { return QColor(60, 110, 190); }
  static QColor afterColor() { return QColor(230, 120, 40); }

  // x = 0..n-1; `after` empty: one series.
  void setValues(const QVector<double>& before, const QString& before_name, const QVector<double>& after = {},
                 const QString& after_name = {});
  // Tick labels of the x axis (key rows); empty: channel numbers.
  void setKeyLabels(const QStringList& labels, const QString& axis_label);
  // Marks x = index (the query's own row, say) with a coloured band.
  void setHighlight(int index);
  // What the bars show, read back from the plot's data (tests).
  QVector<double> values(int series) const;
  int seriesCount() const { return after_->visible() ? 2 : 1; }

 protected:
  void resizeEvent(QResizeEvent* event) override;
  // Presenter zoom scales the tick labels: the plot grows with them, else the
  // rotated token labels leave the bars a few pixels (lesson 2 at 150%).
  void changeEvent(QEvent* event) override;

 private:
  void fitHeight();  // the bars' height at this zoom, plus what slanted labels take
  static constexpr int kHeightAt100 = 150;  // px at the font it was built with
  double built_point_size_ = 0;
  void updateTicks();
  static void fill(QCPBars* bars, const QVector<double>& values);

  QCPBars* before_;
  QCPBars* after_;
  QCPBarsGroup* group_;
  QCPItemRect* highlight_;
  QStringList labels_;
  int count_ = 0;
};

}  // namespace kvscope::ui
