#pragma once
// Cached vs uncached: "Run diff" restarts the session and runs it in lockstep
// with an uncached recomputation. Per position: |delta logit| and KL, coloured
// by verdict (agree, float noise, divergent), the first divergence marked;
// below, the cache audit at the divergence (layer x position error). "Go to
// first bad cell" moves the cursor and the KV view there.
#include "ui/windows/ViewerPanel.h"

class QCustomPlot;
class QCPColorMap;
class QCPGraph;
class QLabel;
class QPushButton;

namespace kvscope::ui {

class DiffPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit DiffPanel(DebuggerContext& context, QWidget* parent = nullptr);
  QPushButton* runButton() const { return run_; }
  QPushButton* auditButton() const { return audit_now_; }
  QPushButton* goToBadCellButton() const { return go_; }
  QLabel* summary() const { return summary_; }
  int pointCount() const;

 signals:
  void runDiffRequested();
  void auditRequested();
  // The first bad cell: round, position, cache, layer, kv head.
  void badCellRequested(qint64 round, qint64 position, int cache, int layer, int head);

 protected:
  void refresh() override;

 private:
  // The audit shown: "Audit now" of the current state, else the diff's.
  const AuditData* shownAudit() const;

 private:
  QPushButton* run_;
  QPushButton* audit_now_;
  QPushButton* go_;
  QLabel* summary_;
  QCustomPlot* positions_;
  QCPGraph* points_[2][3];  // [target, drafter][agree, noise, divergent]
  QCPGraph* kl_;
  QCustomPlot* audit_;
  QCPColorMap* audit_map_;
};

}  // namespace kvscope::ui
