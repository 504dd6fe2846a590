#pragma once
// The compression lab's metrics over the decode steps, slots A and B
// overlaid in their colours: above, KL(p_full || p_compressed) per step with
// a cross where the top-1 token differs from the full cache's; below, the
// attention mass the kept rows held in the full cache's attention.
#include <QColor>
#include <QString>
#include <QWidget>
#include <vector>

#include "core/compress/compression_summary.h"

class QCPAxisRect;
class QCPGraph;
class QCPItemText;
class QCustomPlot;

namespace kvscope::ui {

class CompressionMetricsPlot : public QWidget {
  Q_OBJECT
 public:
  explicit CompressionMetricsPlot(QWidget* parent = nullptr);

  struct Curve {
    QString label;
    QColor color;
    const CompressionSummary* summary = nullptr;  // read during setCurves only
  };
  // One curve pair per slot that ran (at most two); none clears the plot.
  void setCurves(const std::vector<Curve>& curves);

  QCustomPlot* plot() const { return plot_; }
  // What the plot says in place of curves; empty while it shows them.
  QString placeholderText() const;
  // Slots drawn (tests): KL curves with data, and the KL of one of them per step.
  int curveCount() const;
  std::vector<double> klValues(int curve) const;
  std::vector<double> massValues(int curve) const;

 private:
  QString csv() const;
  // The legend in two columns when they fit the plot's width, else in one.
  void fitLegend();

  QCustomPlot* plot_;
  QCPAxisRect* mass_rect_;
  std::vector<QCPGraph*> kl_;    // per slot
  std::vector<QCPGraph*> mass_;  // per slot
  std::vector<QCPGraph*> miss_;  // per slot: steps whose top-1 differs
  std::vector<QString> labels_;
  QCPItemText* placeholder_;  // "Run to see ..." while there are no curves
};

}  // namespace kvscope::ui
