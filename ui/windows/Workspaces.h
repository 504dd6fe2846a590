#pragma once
// Workspaces: one dock arrangement per job over the same panels (Qt
// Creator's modes, RenderDoc's saved layouts), so the panel a job is about
// gets the room on a projector or a laptop:
//   Debug     the session, timeline, tokens, KV cache, attention, diff and
//             row history, all at once (the engineer stepping a round);
//   Teach     the lesson beside one large stage where every panel a lesson
//             page outlines is a tab (the teacher at a projector);
//   Compress  the Compression panel on the stage, the session form beside
//             it (the researcher comparing policies);
//   Capture   the Cache Diff (root cause, audit) over the KV cache with the
//             row history beside it (an engine capture opened).
// Switching (View > Workspace, the workspace bar, Alt+1..4) keeps the
// arrangement the user left, per workspace, per window size (a projector's
// 1024x768 and a laptop's 1280x720 each keep their own) and per presenter
// zoom: zooming to 200% and back gives the 100% arrangement back. The
// arrangements are saved in QSettings across runs.
#include <QByteArray>
#include <QHash>
#include <QList>
#include <QObject>
#include <QSize>

#include "ui/windows/PanelTable.h"

class QAction;
class QActionGroup;
class QDockWidget;
class QMainWindow;
class QSettings;

namespace kvscope::ui {

enum class Workspace { Debug, Teach, Compress, Capture };

class Workspaces : public QObject {
  Q_OBJECT
 public:
  // `docks` are the window's panels, found by their objectName (the panel
  // table's, which also says where each goes in each workspace).
  Workspaces(QMainWindow* window, QList<QDockWidget*> docks);

  static QList<Workspace> all();
  static QString name(Workspace workspace);   // "debug", "teach", ... (settings, --workspace)
  static QString title(Workspace workspace);  // "Debug", "Teach", ...
  static bool parse(const QString& name, Workspace* workspace);

  Workspace current() const { return current_; }
  // One checkable action per workspace (Alt+1..4), for the View menu and the bar.
  QList<QAction*> actions() const;
  QAction* action(Workspace workspace) const;

  // Keeps the current arrangement, then shows `workspace`'s: the one it was
  // left in at this window size and zoom, else its default.
  void switchTo(Workspace workspace);
  // Raises `panel` when it is a tab hidden behind another dock of its group
  // (a closed panel stays closed; a panel on screen is left alone).
  void bringForwardIfTabbed(Panel panel);
  // The current workspace's default arrangement (View > Reset Layout).
  void reset();
  // Presenter zoom: call before the fonts change (the arrangement at `from`
  // is kept) and after (the one kept at the new zoom comes back, else the
  // default proportions at the new zoom).
  void zoomChanging(int from);
  void zoomChanged(int to);

  // Across runs: the current workspace and every arrangement kept.
  void save(QSettings& settings);
  // Reads what save() wrote and switches to the workspace saved as current.
  void restore(QSettings& settings);

  // The dock sizes of the default arrangement, again (once the window is shown).
  void applyDefaultSizes();

 signals:
  void switched(kvscope::ui::Workspace workspace);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QDockWidget* dock(Panel panel) const;
  static Place placeIn(const PanelRow& row, Workspace workspace);
  // The workspace's main tab group and its side column (the table's Stage and Side places).
  static Panel stageOf(Workspace workspace);
  static std::optional<Panel> sideOf(Workspace workspace);
  // The table's panels at `spot` in `workspace`, tabbed onto `anchor` in their tab order.
  void tabInto(Workspace workspace, Place::Spot spot, Panel anchor);
  // "teach/1280x720@150": the workspace at a window size (default: the window's) and zoom.
  QString key(Workspace workspace, int zoom, QSize size = QSize()) const;
  void keep();  // the current arrangement under its key
  void arrange(Workspace workspace);
  // Each workspace's frame: the panels the table places as Frame.
  void arrangeDebug();
  void arrangeTeach();
  void arrangeCompress();
  void arrangeCapture();
  // Restores a kept state while the window is `at` (now and as the layout settles).
  void restoreKept(const QByteArray& state, QSize at);
  void markChecked();

  QMainWindow* window_;
  QList<QDockWidget*> docks_;
  QActionGroup* group_;
  QHash<Workspace, QAction*> actions_;
  Workspace current_ = Workspace::Debug;
  int zoom_ = 100;
  bool sized_once_shown_ = false;  // the default sizes were applied after the first show
  bool defaults_pending_ = true;   // the arrangement is a default one (not a kept state)
  QHash<QString, QByteArray> kept_;  // key() -> QMainWindow::saveState()
  QHash<QString, QSize> window_at_zoom_;  // workspace/zoom -> the window size kept with it
};

}  // namespace kvscope::ui
