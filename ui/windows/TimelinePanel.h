#pragma once
// Round timeline: per round, stacked bars of accepted drafts, the correction
// or bonus token, and rejected drafts; the running acceptance rate alpha on
// the right axis; the cursor's round highlighted. Click a bar to jump there.
// A batched capture: the bars are the shown sequence's, and a marker per
// sequence of the batch says how many drafts each accepted in the round.
#include <vector>

#include "ui/windows/ViewerPanel.h"

class QCustomPlot;
class QCPBars;
class QCPGraph;
class QCPItemRect;
class QCPItemText;
class QMouseEvent;

class QLabel;

namespace kvscope::ui {

class WrappedLegend;

class TimelinePanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit TimelinePanel(DebuggerContext& context, QWidget* parent = nullptr);

  QCustomPlot* plot() const { return plot_; }
  int barCount() const;  // rounds drawn (tests)
  // The per-sequence markers drawn (a batched capture; tests): per sequence, (round, accepted) pairs.
  std::vector<std::vector<std::pair<double, double>>> sequenceMarkers() const;
  QString csv() const;   // one row per round

 signals:
  void roundRequested(qint64 round);

 protected:
  // The legend takes as many columns as fit (presenter zoom makes it wide).
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;
  void refresh() override;

 public:
  // A capture's round as the engine's calls: "drafter calls 4\u20137 \u2192 target call 2".
  static QString callsOfRound(const SessionSnapshot& snapshot, int64_t round);
  // The line above the plot on a capture ("round 2: drafter calls 5-8 -> target call 2"); empty otherwise.
  QString callsLine() const;

 private:
  void onMousePress(QMouseEvent* event);
  void showBatch(const SessionSnapshot* snapshot);
  void fitPlotToFont();

  QCustomPlot* plot_;
  QCPBars* accepted_;
  QCPBars* correction_;
  QCPBars* bonus_;
  QCPBars* rejected_;
  QCPGraph* alpha_;
  QCPItemRect* highlight_;
  QLabel* calls_;  // a capture: the engine's calls the cursor's round stands for (above the plot, never over the bars)
  std::vector<QCPGraph*> sequences_;  // a batched capture: one marker series per sequence
  WrappedLegend* batch_legend_;
};

}  // namespace kvscope::ui
