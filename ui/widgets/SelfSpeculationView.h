#pragma once
// Compressed-cache self-speculation for one compression slot: the full cache
// the target verifies with and the compressed copy it drafts with, side by
// side, one row per sequence position (position 0 on top, as in the KV view):
//   full       K (or V) of the selected layer and kv head, every position;
//   drafting   the same positions in the compressed copy: rows the policy
//              removed hatched grey, the rest in the same colours, so a row
//              the copy wrote itself and got different numbers for shows as
//              a different stripe;
//   compare    two narrow columns: how far each drafting row is from the full
//              cache's (relative max |difference|, dark = far), and for every
//              generated position whether it came from an accepted draft
//              (green), the target's correction of a rejected draft (red) or
//              the target's bonus token after a fully accepted round (blue).
// A dashed line marks where the prompt ends. Plain data in (a recorded
// SelfSpeculationResult); nothing here runs a model.
#include <QString>
#include <QWidget>
#include <functional>
#include <memory>
#include <vector>

#include "core/compress/self_speculation.h"

class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCPItemStraightLine;
class QCustomPlot;
class QLabel;
class QMouseEvent;

namespace kvscope::ui {

// What produced the token at a generated position.
enum class DraftOutcome : uint8_t { Prompt, Accepted, Correction, Bonus };

// Per sequence position 0..positions-1 (prompt positions: Prompt).
std::vector<DraftOutcome> draftOutcomes(const SelfSpeculationResult& result, int64_t positions);

// Wall times of one self-speculation run and of plain greedy decoding of the
// same tokens (both with their prefills); plain_seconds 0: not measured.
struct SpeculationSpeed {
  double self_seconds = 0;
  double plain_seconds = 0;
};

class SelfSpeculationView : public QWidget {
  Q_OBJECT
 public:
  explicit SelfSpeculationView(const QString& slot, QWidget* parent = nullptr);

  // Draws `result` (recorded) at layer and kv head, K or V (`values`), and
  // says how fast it ran against plain decoding. token(position) names rows
  // in the hover text.
  void showResult(std::shared_ptr<const SelfSpeculationResult> result, const QString& label, int64_t layer,
                  int64_t kv_head, bool values, const SpeculationSpeed& speed,
                  const std::function<QString(int64_t)>& token);
  // Nothing drawn; the caption says why (an error, not run yet, switched off).
  void showMessage(const QString& label, const QString& why);

  QCustomPlot* plot() const { return plot_; }
  QString caption() const;
  // Read back from what is drawn (tests): positions the drafting column shows
  // removed, and how many rows the outcome column shows with each outcome.
  std::vector<int64_t> shownRemovedRows() const;
  int64_t shownOutcomes(DraftOutcome outcome) const;

 private:
  void drawCaches(const SelfSpeculationResult& r, int64_t layer, int64_t kv_head, bool values);
  void drawComparison(const SelfSpeculationResult& r, int64_t layer, int64_t kv_head, bool values);
  void markPromptEnd(double row);
  // " · 1.41x slower than plain greedy decoding (41 ms against 29 ms for 16 tokens)"
  static QString speedText(const SpeculationSpeed& speed, int64_t tokens);
  void clearMaps();
  void onHover(QMouseEvent* event);
  QString hoverText(int64_t position, QCPAxisRect* rect, double x) const;

  QString slot_;
  QLabel* caption_;
  QCustomPlot* plot_;
  QCPAxisRect* full_rect_;
  QCPAxisRect* draft_rect_;
  QCPAxisRect* compare_rect_;
  QCPColorMap* full_map_;
  QCPColorMap* draft_map_;
  QCPColorMap* difference_map_;
  QCPColorMap* outcome_map_;
  QCPColorScale* scale_;
  std::vector<QCPItemStraightLine*> prompt_lines_;
  std::shared_ptr<const SelfSpeculationResult> result_;
  std::vector<DraftOutcome> outcomes_;
  int64_t layer_ = 0;
  int64_t kv_head_ = 0;
  bool values_ = false;
  std::function<QString(int64_t)> token_;
};

}  // namespace kvscope::ui
