#pragma once
// Where a compression hurts: the attention-output error of every layer and
// query head (mean over the decode steps of |o_comp - o_full| / |o_full|),
// slots A and B side by side on one colour scale, so the same cell of the two
// compares directly.
#include <QString>
#include <QWidget>
#include <vector>

#include "core/compress/compression_summary.h"

class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCustomPlot;

namespace kvscope::ui {

class CompressionErrorPlot : public QWidget {
  Q_OBJECT
 public:
  explicit CompressionErrorPlot(QWidget* parent = nullptr);

  struct Slot {
    QString label;
    const CompressionSummary* summary = nullptr;  // null: the slot did not run (its map stays empty)
  };
  // Exactly two slots (A, B).
  void setSlots(const std::vector<Slot>& shown);

  QCustomPlot* plot() const { return plot_; }
  // The value drawn at (layer, head) of a slot (NaN when nothing is drawn).
  double shownError(int slot, int64_t layer, int64_t head) const;

 private:
  // "A: query head", or "A: head" / "A" when the two maps are too narrow for it.
  void fitLabels();

  QCustomPlot* plot_;
  std::vector<QString> names_;  // per map: the slot's letter ("" when it shows nothing)
  std::vector<QCPAxisRect*> rects_;
  std::vector<QCPColorMap*> maps_;
  QCPColorScale* scale_;
};

}  // namespace kvscope::ui
