#pragma once
// The debugger's main window: dockable panels over one DebuggerContext, the
// engine controller (worker thread), the stepping toolbar with the round
// scrubber, bookmarks, and the layout saved in QSettings. Stepping (F10/F11)
// walks recorded history while the cursor is in the past and advances the
// live session only from its latest moment.
#include <QByteArray>
#include <QMainWindow>

#include <functional>

#include "core/inspect/session_controller.h"
#include "ui/context/DebuggerContext.h"
#include "ui/engine/EngineController.h"

class QAction;
class QDockWidget;
class QLabel;
class QMenu;
class QSlider;

namespace kvscope::ui {

class AttentionPanel;
class AttentionStepsPanel;
class DiffPanel;
class KvCachePanel;
class LogPanel;
class RowHistoryPanel;
class SessionPanel;
class TimelinePanel;
class TokenStripPanel;

struct MainWindowOptions {
  bool load_on_start = true;  // load the default (or given) models and start a session
  ModelSpec models;            // empty dirs: bundled, else the test fixtures
  bool restore_layout = true;
  int initial_rounds = 0;      // rounds to step right after the first session starts (demos)
  static constexpr int64_t kFirstRejection = -2;
  int64_t select_round = -1;     // then put the cursor on this round (-1: stay at the latest;
                                 // kFirstRejection: the first round that rejected a draft)
  int64_t select_position = -1;  // kFirstRejection: the selected round's first rejected draft
  QString prompt;         // empty: the sample prompt
  int max_new_tokens = 0; // 0: the panel's default
  QString fault;          // inject this fault (a name from core/cache/fault.h) in the first session
  bool run_diff = false;  // run the cached-vs-uncached diff instead of a plain first session
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const MainWindowOptions& options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  DebuggerContext& context() { return context_; }
  EngineController& controller() { return controller_; }
  SessionPanel* sessionPanel() const { return session_; }
  TimelinePanel* timelinePanel() const { return timeline_; }
  TokenStripPanel* tokenStripPanel() const { return tokens_; }
  KvCachePanel* kvCachePanel() const { return kv_; }
  AttentionPanel* attentionPanel() const { return attention_; }
  AttentionStepsPanel* attentionStepsPanel() const { return steps_; }
  DiffPanel* diffPanel() const { return diff_; }
  RowHistoryPanel* rowHistoryPanel() const { return history_; }
  LogPanel* logPanel() const { return log_; }
  QSlider* scrubber() const { return scrubber_; }
  QAction* stepPhaseAction() const { return step_phase_; }
  QAction* stepRoundAction() const { return step_round_; }
  QAction* stepBackAction() const { return step_back_; }
  QAction* runAction() const { return run_; }
  QList<QDockWidget*> docks() const { return docks_; }

  void resetLayout();
  // .kvtrace: the cursor (moment and selection) and bookmarks are saved with it.
  void saveTrace(const QString& path);
  // File > Save Trace As: asks for a path, then saves. False when the user
  // cancelled the file dialog (nothing is saved).
  bool saveTraceAs();
  // A live session ran past its prefill and was not saved as a trace since:
  // closing the window asks first (the "saveFirstDialog" message box), and
  // so do a new session, Load Models, Open Trace and Run Diff.
  bool hasUnsavedSession() const { return unsaved_; }
  void openTrace(const QString& path);
  QString guiStateJson() const;
  void applyGuiState(const QString& json);
  // Shown without blocking (tests find it among the top-level widgets).
  void showError(const QString& what, const QString& message);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  QDockWidget* addPanel(QWidget* panel, const QString& title, const QString& name);
  void buildActions();
  void buildLayout();
  // The default dock sizes; again after the first show, when docks have real sizes.
  void applyDefaultSizes();
  void connectEngine();
  // Before anything that replaces the session (a close, a new session, other
  // models, another trace, the diff): asks `question` with Save / Discard /
  // Cancel when an unsaved session would be lost. True: go on now (nothing
  // unsaved, or Discard). Save stores `after_save` and runs it once the
  // trace is written; Cancel and a cancelled or failed save run nothing.
  bool askToSaveFirst(const QString& question, std::function<void()> after_save);
  // askToSaveFirst, then `replace` now or after the save.
  void replaceSession(const QString& question, std::function<void()> replace);
  void requestDiff();
  void trackUnsaved(const SessionSnapshot* snapshot, SnapshotReason reason);
  void updateActions();
  void updateScrubber();
  void rebuildBookmarkMenu();
  void stepBy(int delta);
  // F10 / F11: through recorded history, else the live session.
  void stepPhase();
  void stepRound();
  void onSnapshot(SnapshotPtr snapshot, SnapshotReason reason);
  void selectRequestedRound();
  void raisePanel(QWidget* panel);

  DebuggerContext context_;
  EngineController controller_;
  MainWindowOptions options_;
  bool start_after_load_ = false;
  int pending_rounds_ = 0;
  bool unsaved_ = false;           // see hasUnsavedSession()
  std::function<void()> after_save_;  // what "Save" in replaceSession() runs once the trace is written

  SessionPanel* session_ = nullptr;
  TimelinePanel* timeline_ = nullptr;
  TokenStripPanel* tokens_ = nullptr;
  KvCachePanel* kv_ = nullptr;
  AttentionPanel* attention_ = nullptr;
  AttentionStepsPanel* steps_ = nullptr;
  DiffPanel* diff_ = nullptr;
  RowHistoryPanel* history_ = nullptr;
  LogPanel* log_ = nullptr;
  QList<QDockWidget*> docks_;
  QByteArray default_state_;
  bool compact_ = false;  // a small screen: timeline and tokens share a tab under the session form
  bool narrow_ = false;   // and the row history joins them

  QAction* run_ = nullptr;
  QAction* stop_ = nullptr;
  QAction* step_phase_ = nullptr;
  QAction* step_round_ = nullptr;
  QAction* step_back_ = nullptr;
  QAction* back_ = nullptr;
  QAction* forward_ = nullptr;
  QAction* latest_ = nullptr;
  QAction* bookmark_ = nullptr;
  QMenu* view_menu_ = nullptr;
  QMenu* bookmark_menu_ = nullptr;
  QSlider* scrubber_ = nullptr;
  QLabel* cursor_label_ = nullptr;
  QLabel* busy_label_ = nullptr;
};

}  // namespace kvscope::ui
