#pragma once
// Cached vs uncached, and why they differ. "Run diff" restarts the session
// and runs it in lockstep with an uncached recomputation (the cursor stays).
// On top, the root cause in one sentence (the first cache operation that
// broke the bookkeeping's contract) and the diff's explanation, with "Go to
// root cause" and "Go to first bad cell". Below, per position |delta logit|
// and KL coloured by verdict (agree, float noise, divergent), and the audit
// heatmap: layer x physical row, each row's verdict in its colour. The audit
// follows the cursor: a live session is audited at the cursor's moment as the
// cursor moves (while the panel is on screen), and the grid shows that moment
// or nothing, captioned with the moment it is of. A capture's grid is its
// check's, captioned so. "Audit at cursor" audits the cursor's moment now.
#include "ui/windows/ViewerPanel.h"

class QCustomPlot;
class QCPColorMap;
class QCPGraph;
class QLabel;
class QMouseEvent;
class QPushButton;
class QSplitter;
class QTextBrowser;

namespace kvscope::ui {

class DiffPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit DiffPanel(DebuggerContext& context, QWidget* parent = nullptr);
  QPushButton* runButton() const { return run_; }
  QPushButton* auditButton() const { return audit_; }
  QPushButton* goToRootCauseButton() const { return go_root_; }
  QPushButton* goToBadCellButton() const { return go_bad_; }
  // The root cause, the explanation, the diff's numbers and the audit's summary.
  QTextBrowser* report() const { return report_; }
  QCustomPlot* auditPlot() const { return audit_plot_; }
  int pointCount() const;
  // What the |delta logit| plot says over itself when the report counts rows it cannot draw
  // (a capture's check keeps no per-row values); empty when every counted row is a point.
  QString plotNote() const { return plot_note_; }
  // The audit drawn: the one of the cursor's moment (the cursor's cache, else
  // the other's, else the diff's audit at the first divergence when it is of
  // that moment); a capture: its check's audit, whatever the cursor.
  const CacheAudit* shownAudit() const;
  // The line over the grid: "Audit of the target cache after round 3 prune ...".
  QString auditCaption() const;
  // The audit grid's axis title in full (shown elided when wider than the grid).
  QString auditAxisTitle() const;
  // What the audit cell under `at` (plot pixels) holds, for its hover tooltip; empty off the grid.
  QString auditCellText(const QPointF& at) const;
  // Whether the panel is on screen (its dock's visibilityChanged): a live
  // session is audited as the cursor moves only while it is (off until told:
  // a window never shown audits nothing by itself).
  void setOnScreen(bool on_screen);
  // The cursor "Go to root cause" / "Go to first bad cell" set (invalid: nothing to go to).
  // The first bad cell is the diff's (its audit at the first divergence), else the shown audit's.
  Cursor rootCauseCursor() const;
  Cursor badCellCursor() const;

 signals:
  void runDiffRequested();
  void auditRequested(const kvscope::Moment& moment);

 protected:
  void refresh() override;
  // Wider than tall (small screens, a short dock): the two plots side by side.
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  void showReport(const SessionSnapshot* snapshot, const DiffReport* diff);
  void showPositions(const DiffReport* diff);
  void showAudit(const CacheAudit* audit);
  QString auditSummary(const CacheAudit& audit) const;
  // Whether Audit at cursor is on: a session with a cache that is not a capture's.
  bool auditable() const;
  void onAuditClick(QMouseEvent* event);
  // The report's height follows its text (up to most of the panel): no sentence cut mid-line.
  void fitReport();
  void fitPlotsToFont();  // the plots' minimum height, in lines of the panel's font
  void fitTicks(QCustomPlot* plot);
  void fitAuditCaption();
  // The report's height that shows its lines up to `room` whole, none cut.
  int wholeLinesHeight(int room) const;
  // Asks for the cursor's audit when a live session has none of that moment.
  void followCursor(const SessionSnapshot* snapshot, const CacheAudit* shown);

  QString plot_note_;
  QPushButton* run_;
  QPushButton* audit_;
  QPushButton* go_root_;
  QPushButton* go_bad_;
  QTextBrowser* report_;
  QCustomPlot* positions_;
  QCPGraph* points_[2][3];  // [target, drafter][agree, noise, divergent]
  QCPGraph* kl_;
  QCustomPlot* audit_plot_;
  QLabel* audit_caption_;
  bool on_screen_ = false;     // its dock's tab is in front on a shown window (setOnScreen)
  bool requested_ = false;     // an audit of requested_moment_ was asked for
  Moment requested_moment_;
  QSplitter* plots_;
  QCPColorMap* audit_map_;
};

}  // namespace kvscope::ui
