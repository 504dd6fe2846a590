#pragma once
// The debugger's main window: dockable panels over one DebuggerContext, the
// engine controller (worker thread), the stepping toolbar with the round
// scrubber, bookmarks, and the layout saved in QSettings. Stepping (F10/F11)
// walks recorded history while the cursor is in the past and advances the
// live session only from its latest moment. For teaching: the Lessons dock
// and menu (LessonPanel, LessonRunner), presenter zoom (View menu, Ctrl+=),
// Run's playback speed (toolbar), Help > Glossary.
#include <QByteArray>
#include <QMainWindow>
#include <QSize>
#include <QPair>
#include <QStringList>

#include <functional>
#include <memory>

#include "core/control/session_controller.h"
#include "ui/context/DebuggerContext.h"
#include "ui/engine/EngineController.h"
#include "ui/windows/PanelTable.h"
#include "ui/windows/StartupScript.h"

class QAction;
class QDockWidget;
class QDoubleSpinBox;
class QLabel;
class QMenu;
class QSlider;

namespace kvscope::ui {

class DockLayoutMemory;
class LessonRunner;
class PanelLessonStage;
class Workspaces;
class SequencePicker;

struct MainWindowOptions {
  bool load_on_start = true;  // load the default (or given) models and start a session
  ModelSpec models;            // empty dirs: the bundled pair
  bool restore_layout = true;
  int initial_rounds = 0;      // rounds to step right after the first session starts (demos)
  static constexpr int64_t kFirstRejection = -2;
  int64_t select_round = -1;     // then put the cursor on this round (-1: stay at the latest;
                                 // kFirstRejection: the first round that rejected a draft)
  int64_t select_position = -1;  // kFirstRejection: the selected round's first rejected draft
  // The Session panel's prompt (empty: the sample prompt) and options for the
  // first session (--fault, --evict, --max-new; SessionOptions' defaults).
  SessionSpec session;
  int compression_speculate_gamma = -1;  // --self-speculate with --compression; -1: the panel's default
  bool run_diff = false;  // run the cached-vs-uncached diff instead of a plain first session
  int lesson = -1;        // once the models are loaded, open this lesson (0-based) instead of a plain session
  int lesson_page = 0;    // at this page
  int presenter_zoom = 0; // 100..200: zoom the window (0: the saved zoom)
  QSize size;             // the first size, which picks the dock layout (invalid: 1600x1000 bounded by the screen)
  QStringList compression;  // once the first session is ready: set the Compression panel's slots ("h2o:0.25") and run them
  QString workspace;       // start in this workspace ("debug", "teach", "compress", "capture"; empty: the saved one)
  QString open_file;      // once the models are loaded, open this .kvtrace or .kvcapture instead of a plain session
  QStringList other_ranks;  // with a .kvcapture: the other ranks' captures of its tensor-parallel run
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const MainWindowOptions& options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  DebuggerContext& context() { return context_; }
  EngineController& controller() { return controller_; }
  SessionPanel* sessionPanel() const { return panels_.session; }
  // What the window does as it opens (StartupScript.h), and how far it got.
  const StartupScript& startupScript() const { return startup_; }
  TimelinePanel* timelinePanel() const { return panels_.timeline; }
  TokenStripPanel* tokenStripPanel() const { return panels_.tokens; }
  KvCachePanel* kvCachePanel() const { return panels_.kv; }
  AttentionPanel* attentionPanel() const { return panels_.attention; }
  AttentionStepsPanel* attentionStepsPanel() const { return panels_.steps; }
  CompressionPanel* compressionPanel() const { return panels_.compression; }
  DiffPanel* diffPanel() const { return panels_.diff; }
  RowHistoryPanel* rowHistoryPanel() const { return panels_.history; }
  LogPanel* logPanel() const { return panels_.log; }
  LessonPanel* lessonPanel() const { return panels_.lessons; }
  LessonRunner* lessonRunner() const { return lesson_runner_; }
  QDockWidget* dock(const QString& object_name) const;
  QDockWidget* dock(Panel panel) const;
  QDoubleSpinBox* phaseDelayBox() const { return phase_delay_; }
  QLabel* firstStartHint() const { return hint_; }
  QSlider* scrubber() const { return scrubber_; }
  QAction* stepPhaseAction() const { return step_phase_; }
  QAction* stepRoundAction() const { return step_round_; }
  QAction* stepBackAction() const { return step_back_; }
  QAction* runAction() const { return run_; }
  QList<QDockWidget*> docks() const { return docks_; }
  Workspaces* workspaces() const { return workspaces_; }

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
  // Another engine's capture (or kvscope's own), checked against the loaded
  // models, in place of the live session.
  void openCapture(const QString& path);
  // Every rank's capture of one tensor-parallel run (one path: openCapture).
  void openCaptures(const QStringList& paths);
  // A .kvcapture by its name, else a trace.
  void openFile(const QString& path);
  void saveCaptureAs();
  QString guiStateJson() const;
  void applyGuiState(const QString& json);
  // What the last applied GUI state held that the trace does not (each
  // also logged and shown in the status bar): fitGuiState's warnings.
  const QStringList& guiStateWarnings() const { return gui_state_warnings_; }
  // Shown without blocking (tests find it among the top-level widgets).
  void showError(const QString& what, const QString& message);
  // The Session panel's prompt and options; nullopt (the refusal shown) when
  // the session would refuse them.
  std::optional<SessionSpec> panelSession();

  // Lessons: opens page `page` of lesson `lesson` (Lessons menu, --lesson).
  void openLesson(int lesson, int page = 0);
  // A lesson page's session, from the Session panel's settings: through
  // replaceSession, so an unsaved session is asked about first.
  void startLessonSession(bool diff);
  // The session's first `rounds` rounds were stepped by a lesson: the lesson
  // file reproduces them, so they are not unsaved work.
  void markReproducible(int64_t rounds);

  // Presenter mode: the whole window's fonts, plot labels and markers at `percent` (100..200).
  void setPresenterZoom(int percent);
  int presenterZoom() const;

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  // Docks every panel of the table (PanelTable.h), `contents` in its order.
  void dockPanels(const QVector<QWidget*>& contents);
  void buildActions();
  void buildLessonMenu(QMenu* menu);
  void buildViewActions();
  void buildHelpMenu(QMenu* help);
  // "F10: step one phase ..." in the status bar until the user first steps or runs.
  void showFirstStartHint();
  void hideFirstStartHint();
  // The workspaces (Workspaces): View > Workspace and the bar in the menu bar's corner.
  void buildWorkspaces();
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
  // Loads `spec`'s models, remembering the fields that asked (restored if the load fails).
  void requestLoad(const ModelSpec& spec);
  void trackUnsaved(const SessionSnapshot* snapshot, SnapshotReason reason);
  void updateActions();
  void updateScrubber();
  void rebuildBookmarkMenu();
  void stepBy(int delta);
  // F10 / F11: through recorded history, else the live session.
  void stepPhase();
  void stepRound();
  void onSnapshot(SnapshotPtr snapshot, SnapshotReason reason);
  // The start-up script (StartupScript.h): runs steps until one waits for the
  // engine; continueStartup() goes on when the engine reports it done.
  void runStartupSteps();
  enum class StepStart { Waiting, Done, Failed };
  StepStart startStartupStep(const StartupStep& step);
  void continueStartup(SnapshotReason reason, bool finished);
  // The user (or a lesson the user opened) replaces the session: the script's
  // remaining steps belonged to the old one.
  void stopStartupForUser();
  void selectRequestedMoment(int64_t round, int64_t position);
  // --compression: the panel's slots set and run on the first session.
  void runRequestedCompression(const QStringList& compression_slots);
  void raisePanel(QWidget* panel);

  DebuggerContext context_;
  EngineController controller_;
  MainWindowOptions options_;
  bool start_after_load_ = false;  // the user's Load: start a session once the models are in
  StartupScript startup_;
  bool in_startup_step_ = false;  // a step is running: what it starts is the script's, not the user's
  bool unsaved_ = false;           // see hasUnsavedSession()
  QStringList gui_state_warnings_;
  int64_t reproducible_rounds_ = 0;  // see markReproducible()
  QPair<QString, QString> requested_dirs_;  // the target and drafter fields of the load in progress
  QPair<QString, QString> loaded_dirs_;     // ... of the models in use
  std::function<void()> after_save_;  // what "Save" in replaceSession() runs once the trace is written

  PanelSet panels_;  // made by the panel table's factories
  std::unique_ptr<PanelLessonStage> lesson_stage_;  // what the lesson runner acts on
  LessonRunner* lesson_runner_ = nullptr;
  QList<QDockWidget*> docks_;
  Workspaces* workspaces_ = nullptr;
  bool command_line_workspace_used_ = false;  // the first capture opened honours --workspace
  DockLayoutMemory* layout_memory_ = nullptr;

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
  SequencePicker* sequence_picker_ = nullptr;  // a batched capture's shown sequence
  SequencePicker* rank_picker_ = nullptr;      // a tensor-parallel run's shown rank
  QStringList capture_paths_;                  // the open capture (a run's ranks: every rank's file); empty: none
  QStringList opening_capture_;                // the capture being opened
  bool repicking_sequence_ = false;            // the capture is being reopened on another sequence
  QLabel* busy_label_ = nullptr;
  QLabel* hint_ = nullptr;
  QDoubleSpinBox* phase_delay_ = nullptr;
};

}  // namespace kvscope::ui
