#include "ui/windows/MainWindow.h"

#include <QAction>
#include <algorithm>
#include <QApplication>
#include <QCloseEvent>
#include <QDesktopServices>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QSettings>
#include <QSignalBlocker>
#include <QSlider>
#include <QStatusBar>
#include <QTimer>
#include <QToolBar>
#include <utility>

#include <spdlog/spdlog.h>

#include "ui/context/GuiState.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/widgets/PresenterZoom.h"
#include "ui/windows/GlossaryDialog.h"
#include "ui/windows/LessonPanel.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/RoundName.h"
#include "ui/widgets/SequencePicker.h"
#include "ui/widgets/ShardText.h"
#include "ui/windows/AttentionPanel.h"
#include "ui/windows/AttentionStepsPanel.h"
#include "ui/windows/CompressionPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/DockLayoutMemory.h"
#include "ui/windows/DockTabNames.h"
#include "ui/windows/FileCheck.h"
#include "ui/windows/PanelLessonStage.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/LogPanel.h"
#include "ui/windows/RowHistoryPanel.h"
#include "ui/windows/SessionPanel.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"
#include "ui/windows/WindowFit.h"
#include "ui/windows/Workspaces.h"

namespace kvscope::ui {

MainWindow::MainWindow(const MainWindowOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options) {
  setWindowTitle(tr("kvscope \u2014 KV cache debugger for speculative decoding"));
  setObjectName(QStringLiteral("kvscopeMainWindow"));
  setDockNestingEnabled(true);
  QSize size(1600, 1000);  // the first run's size; later runs restore the saved geometry
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    size = size.boundedTo(screen->availableGeometry().size());
  }
  if (options_.size.isValid()) size = options_.size;
  if (const QScreen* screen = QGuiApplication::primaryScreen()) setMinimumSize(minimumWindowSize(screen->availableGeometry().size()));
  resize(size);

  QVector<QWidget*> contents;
  for (const PanelRow& row : panelTable()) contents << row.make(context_, panels_);

  buildActions();  // the View menu the docks' toggles join
  dockPanels(contents);
  buildWorkspaces();
  connectEngine();
  // After connectEngine: the runner sees each snapshot once the context holds it.
  lesson_stage_ = std::make_unique<PanelLessonStage>(
      context_, controller_, panels_, *this,
      PanelLessonStage::WindowCalls{[this](bool diff) { startLessonSession(diff); },
                                    [this](int64_t rounds) { markReproducible(rounds); }});
  lesson_runner_ = new LessonRunner(*lesson_stage_, this);
  connect(panels_.lessons, &LessonPanel::pageRequested, lesson_runner_, &LessonRunner::show);
  connect(lesson_runner_, &LessonRunner::statusChanged, panels_.lessons, &LessonPanel::setStatus);
  // The page's text appears with its state, bound to the page's moment.
  connect(lesson_runner_, &LessonRunner::pageStarted, panels_.lessons, [this] { panels_.lessons->setPageMoment(Cursor{}); });
  connect(lesson_runner_, &LessonRunner::pageReady, panels_.lessons, [this] { panels_.lessons->setPageMoment(lesson_runner_->pageCursor()); });

  // Panels send requests; the context (owned here) changes.
  connect(panels_.timeline, &TimelinePanel::roundRequested, this, [this](qint64 round) { context_.goToRound(round); });
  connect(panels_.tokens, &TokenStripPanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p); });
  // A replayed moment names the model it needs; a live one uses the session's.
  connect(panels_.steps, &AttentionStepsPanel::explainRequested, this, [this](const ExplainRequest& request, bool what_if) {
    const SessionSnapshot* snapshot = context_.snapshot();
    if (snapshot == nullptr || !snapshot->replay_only) return controller_.explain(request, what_if);
    controller_.explain(request, what_if,
                        RecordedTarget{snapshot->target_name, snapshot->target.layers, snapshot->target.heads,
                                       snapshot->target.kv_heads, snapshot->target.head_dim,
                                       snapshot->from_capture ? snapshot->opened_file : std::string()});
  });
  connect(&controller_, &EngineController::explained, panels_.steps, &AttentionStepsPanel::showExplanation);
  connect(&controller_, &EngineController::whatIfReady, panels_.steps, &AttentionStepsPanel::showWhatIf);
  connect(&controller_, &EngineController::explainFailed, panels_.steps, &AttentionStepsPanel::showFailure);
  connect(panels_.compression, &CompressionPanel::compressRequested, &controller_, &EngineController::compress);
  connect(&controller_, &EngineController::compressed, panels_.compression, &CompressionPanel::showRun);
  connect(&controller_, &EngineController::compressionFailed, panels_.compression, &CompressionPanel::showFailure);
  connect(panels_.diff, &DiffPanel::runDiffRequested, this, &MainWindow::requestDiff);
  connect(panels_.diff, &DiffPanel::auditRequested, this, [this](const Moment& moment) { controller_.auditAt(moment); });
  connect(panels_.session, &SessionPanel::loadRequested, this, [this](const ModelSpec& spec) {
    replaceSession(tr("Save the trace before loading other models?"), [this, spec] {
      start_after_load_ = true;
      requestLoad(spec);
    });
  });
  connect(panels_.session, &SessionPanel::startRefused, this,
          [this](const QString& message) { showError(tr("Starting a session"), message); });
  connect(panels_.session, &SessionPanel::startRequested, this, [this](const SessionSpec& spec) {
    replaceSession(tr("Save the trace before starting a new session?"), [this, spec] { controller_.startSession(spec); });
  });
  connect(&context_, &DebuggerContext::cursorChanged, this, [this] {
    updateScrubber();
    updateActions();
  });
  connect(&context_, &DebuggerContext::bookmarksChanged, this, &MainWindow::rebuildBookmarkMenu);
  // On a narrow screen the Row History is a tab in the left column, not beside the cache:
  // a picked row brings it forward there. (Teach's and Compress's stages tab it with the panel
  // clicked in: left as they are.)
  connect(&context_, &DebuggerContext::rowPicked, this, [this] {
    if (!workspaces_) return;
    const Workspace shown = workspaces_->current();
    if (shown == Workspace::Debug || shown == Workspace::Capture) workspaces_->bringForwardIfTabbed(Panel::RowHistory);
  });

  layout_memory_ = new DockLayoutMemory(this, docks_);  // growing the window back restores its layout
  new DockTabNames(this);  // tabs keep whole names (scroll arrows when they do not fit)
  if (options_.restore_layout) {
    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    fitToScreen(this);  // saved on a larger screen: put back inside this one
    workspaces_->restore(settings);
  }
  if (Workspace workspace; !options_.workspace.isEmpty() && Workspaces::parse(options_.workspace, &workspace)) {
    workspaces_->switchTo(workspace);
  }
  // --presenter / --zoom for this run only; the View menu's zoom is remembered.
  const int zoom = options_.presenter_zoom > 0 ? options_.presenter_zoom
                                               : QSettings().value(QStringLiteral("view/presenterZoom"), 100).toInt();
  if (zoom != 100) {
    workspaces_->zoomChanging(100);
    applyPresenterZoom(this, zoom);
    workspaces_->zoomChanged(presenterZoom());
  }
  // Panels re-create some axes (small multiples) as sessions change: zoom those too.
  connect(&context_, &DebuggerContext::sessionChanged, this, [this] {
    if (presenterZoom() != 100) QTimer::singleShot(0, this, [this] { applyPresenterZoom(this, presenterZoom()); });
  });
  showFirstStartHint();
  updateActions();
  panels_.session->setWeightResidency(options_.models.weights);
  panels_.session->setOptions(options_.session.options);
  if (!options_.session.prompt.empty()) {
    QStringList lines{QString::fromStdString(options_.session.prompt)};
    for (const std::string& more : options_.session.more_prompts) lines << QString::fromStdString(more);
    panels_.session->setPrompt(lines.join(QLatin1Char('\n')));
    panels_.session->setBatchLines(lines.size() > 1);  // several prompts: one sequence per line
  }
  if (options_.load_on_start) {
    panels_.session->setModelDirs(QString::fromStdString(options_.models.target_dir),
                           QString::fromStdString(options_.models.drafter_dir));
  }
  startup_ = StartupScript(startupSteps(options_));
  runStartupSteps();
}

void MainWindow::requestLoad(const ModelSpec& spec) {
  requested_dirs_ = {QString::fromStdString(spec.target_dir), QString::fromStdString(spec.drafter_dir)};
  controller_.loadModels(spec);
}

MainWindow::~MainWindow() {
  controller_.stop();
  // Panels unregister from the context in their destructors: delete them
  // while the context (a member) is still alive.
  qDeleteAll(docks_);
  docks_.clear();
}

void MainWindow::dockPanels(const QVector<QWidget*>& contents) {
  const QVector<PanelRow>& table = panelTable();
  for (qsizetype i = 0; i < table.size(); ++i) {
    auto* dock = new QDockWidget(tr(table[i].title), this);
    dock->setObjectName(QString::fromLatin1(table[i].object_name));
    dock->setWidget(contents[i]);
    docks_.push_back(dock);
    view_menu_->addAction(dock->toggleViewAction());
  }
  // These two compute only while someone can see them.
  connect(dock(Panel::AttentionSteps), &QDockWidget::visibilityChanged, panels_.steps, &AttentionStepsPanel::setOnScreen);
  connect(dock(Panel::Diff), &QDockWidget::visibilityChanged, panels_.diff, &DiffPanel::setOnScreen);
}

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QMenu* debug = menuBar()->addMenu(tr("&Debug"));
  bookmark_menu_ = menuBar()->addMenu(tr("&Bookmarks"));
  view_menu_ = menuBar()->addMenu(tr("&View"));
  QMenu* lessons_menu = menuBar()->addMenu(tr("&Lessons"));
  QMenu* help = menuBar()->addMenu(tr("&Help"));

  QAction* load = file->addAction(tr("&Load Models"), this, [this] {
    replaceSession(tr("Save the trace before loading other models?"), [this] {
      start_after_load_ = true;
      requestLoad(panels_.session->modelSpec());
    });
  });
  load->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  QAction* restart = file->addAction(tr("&Start Session"), this, [this] {
    replaceSession(tr("Save the trace before starting a new session?"),
                   [this] {
                     if (const auto spec = panelSession()) controller_.startSession(*spec);
                   });
  });
  restart->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  file->addSeparator();
  file->addAction(tr("&Open Trace\u2026"), QKeySequence::Open, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), tr("kvscope traces (*.kvtrace);;All files (*)"));
    if (path.isEmpty()) return;
    // A file that is no trace is refused before the session is put at stake.
    if (const QString problem = openableProblem(path, OpenableKind::Trace); !problem.isEmpty()) {
      showError(tr("Opening the trace"), problem);
      return;
    }
    replaceSession(tr("Save the trace before opening another?"), [this, path] { openTrace(path); });
  });
  file->addAction(tr("&Save Trace As\u2026"), QKeySequence::Save, this, &MainWindow::saveTraceAs);
  file->addSeparator();
  QAction* open_capture = file->addAction(tr("Open &Capture\u2026"), this, [this] {
    // Several files: every rank's capture of one tensor-parallel run.
    const QStringList paths = QFileDialog::getOpenFileNames(this, tr("Open capture (or every rank's capture of a run)"),
                                                            QString(), tr("engine captures (*.kvcapture);;All files (*)"));
    if (paths.isEmpty()) return;
    for (const QString& path : paths) {
      if (const QString problem = openableProblem(path, OpenableKind::Capture); !problem.isEmpty()) {
        showError(tr("Opening the capture"), problem);
        return;
      }
    }
    replaceSession(tr("Save the trace before opening a capture?"), [this, paths] { openCaptures(paths); });
  });
  open_capture->setObjectName(QStringLiteral("openCaptureAction"));
  open_capture->setToolTip(tr("Open a .kvcapture of any engine (kvscope_capture for PyTorch, kvscope-cli run --capture): "
                              "its cache is checked against kvscope's reference forward of the loaded models"));
  QAction* save_capture = file->addAction(tr("Save C&apture As\u2026"), this, &MainWindow::saveCaptureAs);
  save_capture->setObjectName(QStringLiteral("saveCaptureAction"));
  save_capture->setToolTip(tr("Write the live session as a .kvcapture, the format other engines write"));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  run_ = debug->addAction(tr("Run"), this, [this] {
    hideFirstStartHint();
    if (controller_.running()) controller_.stop();
    else controller_.run();
  });
  run_->setShortcut(Qt::Key_F5);
  stop_ = debug->addAction(tr("Stop"), this, [this] { controller_.stop(); });
  stop_->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F5));
  step_phase_ = debug->addAction(tr("Step Phase"), this, &MainWindow::stepPhase);
  step_phase_->setShortcut(Qt::Key_F10);
  step_phase_->setToolTip(tr("Next phase: through recorded history when the cursor is in the past, else the live session (F10)"));
  step_round_ = debug->addAction(tr("Step Round"), this, &MainWindow::stepRound);
  step_round_->setShortcut(Qt::Key_F11);
  step_round_->setToolTip(tr("To the end of the round: through recorded history when the cursor is in the past, else the live session (F11)"));
  step_back_ = debug->addAction(tr("Step Back Phase"), this, [this] { context_.stepBackPhase(); });
  step_back_->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F10));
  debug->addAction(tr("Run Diff (cached vs uncached)"), this, &MainWindow::requestDiff);
  debug->addAction(tr("Audit at Cursor"), this, [this] { controller_.auditAt(context_.cursor().moment()); });
  debug->addSeparator();
  back_ = debug->addAction(tr("Previous Round"), this, [this] { stepBy(-1); });
  back_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Left));
  forward_ = debug->addAction(tr("Next Round"), this, [this] { stepBy(1); });
  forward_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Right));
  latest_ = debug->addAction(tr("Latest"), this, [this] { context_.setCursor(context_.latest()); });
  latest_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_End));

  bookmark_ = new QAction(tr("Toggle Bookmark"), this);
  bookmark_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_B));
  connect(bookmark_, &QAction::triggered, this, [this] { context_.toggleBookmark(context_.cursor().round); });
  addAction(bookmark_);
  for (int i = 0; i < 9; ++i) {
    auto* jump = new QAction(this);
    jump->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
    connect(jump, &QAction::triggered, this, [this, i] {
      if (i < context_.bookmarks().size()) context_.goToRound(context_.bookmarks()[i]);
    });
    addAction(jump);
  }
  rebuildBookmarkMenu();

  // Every toolbar button says its key (presenters read it off the screen).
  run_->setToolTip(tr("Run / Pause: step to the end at the playback speed (F5)"));
  stop_->setToolTip(tr("Stop the run after the phase in progress (Shift+F5)"));
  step_back_->setToolTip(tr("Step Back Phase through recorded history (Shift+F10)"));
  back_->setToolTip(tr("Previous Round (Alt+Left)"));
  forward_->setToolTip(tr("Next Round (Alt+Right)"));
  latest_->setToolTip(tr("Latest recorded moment (Alt+End)"));
  bookmark_->setToolTip(tr("Toggle Bookmark on this round (Ctrl+B; Ctrl+1..9 jump)"));
  // The stepping buttons carry their key in their text too (the menus show it already).
  step_back_->setIconText(tr("Step Back (Shift+F10)"));
  step_phase_->setIconText(tr("Step Phase (F10)"));
  step_round_->setIconText(tr("Step Round (F11)"));

  QToolBar* bar = addToolBar(tr("Debug"));
  bar->setObjectName(QStringLiteral("debugToolbar"));
  for (QAction* action : {run_, stop_, step_back_, step_phase_, step_round_}) bar->addAction(action);
  // Playback speed: Run pauses this long after each phase, so a class can watch a round.
  phase_delay_ = new QDoubleSpinBox;
  phase_delay_->setObjectName(QStringLiteral("phaseDelay"));
  phase_delay_->setRange(0.0, kMaxPhaseDelayMs / 1000.0);
  phase_delay_->setSingleStep(0.25);
  phase_delay_->setDecimals(2);
  phase_delay_->setSuffix(tr(" s/phase"));
  phase_delay_->setSpecialValueText(tr("full speed"));
  phase_delay_->setToolTip(tr("Playback speed of Run: the pause after each phase (0 to 2 s)"));
  connect(phase_delay_, &QDoubleSpinBox::valueChanged, this, [this](double seconds) {
    controller_.setPhaseDelay(static_cast<int>(seconds * 1000 + 0.5));
    QSettings().setValue(QStringLiteral("playback/phaseDelaySeconds"), seconds);
  });
  phase_delay_->setValue(QSettings().value(QStringLiteral("playback/phaseDelaySeconds"), 0.0).toDouble());
  bar->addWidget(phase_delay_);
  bar->addSeparator();
  for (QAction* action : {back_, forward_, latest_, bookmark_}) bar->addAction(action);
  scrubber_ = new QSlider(Qt::Horizontal);
  scrubber_->setObjectName(QStringLiteral("roundScrubber"));
  scrubber_->setRange(0, 0);
  scrubber_->setToolTip(tr("Round scrubber: drag through the recorded rounds"));
  connect(scrubber_, &QSlider::valueChanged, this, [this](int round) { context_.goToRound(round); });
  bar->addWidget(new QLabel(tr("  Round ")));
  bar->addWidget(scrubber_);
  scrubber_->setMinimumWidth(160);

  buildViewActions();
  buildLessonMenu(lessons_menu);
  buildHelpMenu(help);
  // The cursor in words, always visible (the toolbar overflows on small screens).
  sequence_picker_ = new SequencePicker;
  statusBar()->addPermanentWidget(sequence_picker_);
  connect(sequence_picker_, &SequencePicker::picked, this, [this](int sequence) {
    const SessionSnapshot* shown = context_.snapshot();
    if (capture_paths_.isEmpty() && shown && !shown->from_capture) {  // a batch, live or traced: the engine shows another
      if (sequence != shown->shown_sequence) controller_.showSequence(sequence);
      return;
    }
    if (capture_paths_.isEmpty()) return;
    repicking_sequence_ = true;
    opening_capture_ = capture_paths_;
    controller_.openCapture(capture_paths_, sequence, rank_picker_->count() > 1 ? rank_picker_->shown() : -1);
  });
  rank_picker_ = new SequencePicker(SequencePicker::Kind::Rank);
  statusBar()->addPermanentWidget(rank_picker_);
  connect(rank_picker_, &SequencePicker::picked, this, [this](int rank) {
    if (capture_paths_.isEmpty()) return;
    repicking_sequence_ = true;
    opening_capture_ = capture_paths_;
    controller_.openCapture(capture_paths_, -1, rank);
  });
  cursor_label_ = new QLabel;
  cursor_label_->setObjectName(QStringLiteral("cursorLabel"));
  statusBar()->addPermanentWidget(cursor_label_);
  busy_label_ = new QLabel;
  statusBar()->addPermanentWidget(busy_label_);
}

void MainWindow::resetLayout() { workspaces_->reset(); }

void MainWindow::buildWorkspaces() {
  workspaces_ = new Workspaces(this, docks_);
  QMenu* menu = view_menu_->addMenu(tr("&Workspace"));
  menu->setObjectName(QStringLiteral("workspaceMenu"));
  menu->addActions(workspaces_->actions());
  view_menu_->addSeparator();
  view_menu_->addAction(tr("Reset Layout"), this, &MainWindow::resetLayout)
      ->setToolTip(tr("The current workspace's default arrangement"));
  // The workspace bar sits in the menu bar's free corner: no toolbar row is
  // spent on it, and the stepping toolbar keeps its width on a 1024 screen.
  auto* bar = new QToolBar(tr("Workspaces"));
  bar->setObjectName(QStringLiteral("workspaceBar"));
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  // No taller than the menus beside it: the menu bar (and so every panel) keeps its height.
  bar->setStyleSheet(QStringLiteral("QToolBar { border: 0; padding: 0; margin: 0; spacing: 0; } "
                                    "QToolButton { padding: 0px 4px; margin: 0; }"));
  bar->setContentsMargins(0, 0, 0, 0);
  bar->addWidget(new QLabel(tr("Workspace: ")));
  bar->addActions(workspaces_->actions());
  menuBar()->setCornerWidget(bar, Qt::TopRightCorner);
  // Sizes recorded for one workspace say nothing about another's docks.
  connect(workspaces_, &Workspaces::switched, this, [this] { layout_memory_->forget(); });
}

void MainWindow::closeEvent(QCloseEvent* event) {
  // Save: the window closes once the trace is written (traceSaved).
  if (!askToSaveFirst(tr("Save the trace before closing?"), [this] { close(); })) {
    event->ignore();
    return;
  }
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  workspaces_->save(settings);
  controller_.stop();
  event->accept();
}

std::optional<SessionSpec> MainWindow::panelSession() {
  QString error;
  auto spec = panels_.session->sessionSpec(&error);
  if (!spec) showError(tr("Starting a session"), error);
  return spec;
}

void MainWindow::requestDiff() {
  replaceSession(tr("Save the trace before running the diff?"), [this] {
    if (const auto spec = panelSession()) controller_.runDiff(*spec);
  });
}

void MainWindow::replaceSession(const QString& question, std::function<void()> replace) {
  stopStartupForUser();
  if (askToSaveFirst(question, replace)) replace();
}

bool MainWindow::askToSaveFirst(const QString& question, std::function<void()> after_save) {
  if (!unsaved_) return true;
  QMessageBox box(QMessageBox::Question, tr("Unsaved session"), question,
                  QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, this);
  box.setObjectName(QStringLiteral("saveFirstDialog"));
  box.setInformativeText(tr("The session's rounds have not been saved as a .kvtrace; "
                            "Discard loses them."));
  box.setDefaultButton(QMessageBox::Save);
  box.setEscapeButton(QMessageBox::Cancel);
  switch (box.exec()) {
    case QMessageBox::Discard:
      return true;
    case QMessageBox::Save:
      // A run in progress would queue the save behind it: pause it first.
      controller_.stop();
      // The save runs on the engine thread: `after_save` waits for its
      // success (traceSaved); a failure shows its dialog and runs nothing.
      if (saveTraceAs()) after_save_ = std::move(after_save);
      return false;
    default:
      return false;  // Cancel, or the box was closed: keep the session
  }
}

void MainWindow::trackUnsaved(const SessionSnapshot* snapshot, SnapshotReason reason) {
  if (snapshot == nullptr || snapshot->replay_only) {
    unsaved_ = false;  // nothing recorded here, or an opened trace: its file is the saved copy
  } else if (reason != SnapshotReason::Audit) {
    // A fresh session holds only its prefill: nothing the user did yet.
    // Any phase past it (a step, a run, a diff) is work a close would lose,
    // except the rounds a lesson stepped (its file steps them again).
    unsaved_ = snapshot->lastRound() >= 1 && snapshot->lastRound() > reproducible_rounds_;
  }
}

void MainWindow::connectEngine() {
  connect(&controller_, &EngineController::busyChanged, this, [this](bool busy, const QString& what) {
    panels_.session->setBusy(busy, what);
    busy_label_->setText(busy ? what + QStringLiteral("\u2026") : tr("ready"));
    updateActions();
  });
  connect(&controller_, &EngineController::runningChanged, this, [this] { updateActions(); });
  connect(&controller_, &EngineController::progress, panels_.session, &SessionPanel::setProgress);
  connect(&controller_, &EngineController::modelsLoaded, this,
          [this](const QString& target, const QString& drafter_dir, const QString& drafter_name, const QStringList& notes) {
            panels_.session->setLoadedModels(target, drafter_name);
            loaded_dirs_ = requested_dirs_;
            for (const QString& note : notes) statusBar()->showMessage(note, 15000);
            const ModelSpec spec = panels_.session->modelSpec();
            if (!spec.target_dir.empty()) panels_.session->rememberRecent(target);
            if (!spec.drafter_dir.empty() && !drafter_dir.isEmpty()) panels_.session->rememberRecent(drafter_dir);
            if (const StartupStep* step = startup_.current(); step && step->action == StartupAction::LoadModels) {
              startup_.advance();
              runStartupSteps();
            } else if (start_after_load_) {
              start_after_load_ = false;
              if (const auto spec = panelSession()) controller_.startSession(*spec);
            }
          });
  connect(&controller_, &EngineController::snapshotReady, this, &MainWindow::onSnapshot);
  connect(&controller_, &EngineController::failed, this, [this](const QString& what, const QString& message) {
    // The models that failed to load are not the ones in use: the fields say what is loaded.
    if (what == QStringLiteral("Loading models")) panels_.session->setModelDirs(loaded_dirs_.first, loaded_dirs_.second);
    repicking_sequence_ = false;
    showError(what, message);
  });
  connect(&controller_, &EngineController::traceSaved, this, [this](const QString& path) {
    statusBar()->showMessage(tr("saved %1").arg(path), 8000);
    unsaved_ = false;
    if (after_save_) {
      const std::function<void()> replace = std::move(after_save_);
      after_save_ = nullptr;
      replace();
    }
  });
  connect(&controller_, &EngineController::ranksOpened, this, [this](const QStringList& ranks, int shown) {
    rank_picker_->setSequences(ranks, shown);
    const SessionSnapshot* snapshot = context_.snapshot();
    rank_picker_->setNote(snapshot && ranks.size() > 1 ? shardNote(*snapshot) : QString());
    rank_picker_->setToolTip(snapshot && ranks.size() > 1 ? shardText(*snapshot) : QString());
  });
  connect(&controller_, &EngineController::captureOpened, this,
          [this](const QString& path, const QString& verdict, const QStringList& sequences, int shown) {
    setWindowTitle(tr("kvscope \u2014 %1 (capture)").arg(path));
    capture_paths_ = opening_capture_;
    sequence_picker_->setSequences(sequences, shown);
    // Another sequence of the open capture: every panel follows, the workspace stays.
    // A --workspace named on the command line wins over Capture for the file it opened.
    Workspace wanted = Workspace::Capture;
    if (!std::exchange(command_line_workspace_used_, true) && !options_.workspace.isEmpty()) Workspaces::parse(options_.workspace, &wanted);
    if (!std::exchange(repicking_sequence_, false)) workspaces_->switchTo(wanted);
    statusBar()->showMessage(verdict, 30000);
    raisePanel(panels_.diff);
    // The root cause first, as for a diffed session.
    if (const SessionSnapshot* snapshot = context_.snapshot(); snapshot && snapshot->diff && snapshot->diff->root_cause) {
      if (const Cursor cause = panels_.diff->rootCauseCursor(); cause.valid()) context_.setCursor(cause);
    }
  });
  connect(&controller_, &EngineController::captureSaved, this, [this](const QString& path) {
    statusBar()->showMessage(tr("capture saved to %1 (check it with kvscope-cli check)").arg(path), 8000);
  });
  connect(&controller_, &EngineController::traceOpened, this, [this](const QString& path, const QString& gui) {
    applyGuiState(gui);
    setWindowTitle(tr("kvscope \u2014 %1 (replay)").arg(path));
  });
}

void MainWindow::saveTrace(const QString& path) { controller_.saveTrace(path, guiStateJson()); }

bool MainWindow::saveTraceAs() {
  QString path = QFileDialog::getSaveFileName(this, tr("Save trace"), QStringLiteral("session.kvtrace"),
                                              tr("kvscope traces (*.kvtrace)"));
  if (path.isEmpty()) return false;
  if (!path.endsWith(QStringLiteral(".kvtrace"))) path += QStringLiteral(".kvtrace");
  saveTrace(path);
  return true;
}

void MainWindow::openTrace(const QString& path) {
  stopStartupForUser();
  controller_.openTrace(path);
}

void MainWindow::openCapture(const QString& path) { openCaptures({path}); }

void MainWindow::openCaptures(const QStringList& paths) {
  stopStartupForUser();
  opening_capture_ = paths;
  controller_.openCapture(paths);
}

void MainWindow::openFile(const QString& path) {
  const bool capture = path.endsWith(QStringLiteral(".kvcapture"), Qt::CaseInsensitive);
  if (const QString problem = openableProblem(path, capture ? OpenableKind::Capture : OpenableKind::Trace);
      !problem.isEmpty()) {
    showError(capture ? tr("Opening the capture") : tr("Opening the trace"), problem);
    return;
  }
  if (capture) openCapture(path);
  else openTrace(path);
}

void MainWindow::saveCaptureAs() {
  QString path = QFileDialog::getSaveFileName(this, tr("Save capture"), QStringLiteral("session.kvcapture"),
                                              tr("engine captures (*.kvcapture)"));
  if (path.isEmpty()) return;
  if (!path.endsWith(QStringLiteral(".kvcapture"))) path += QStringLiteral(".kvcapture");
  controller_.saveCapture(path);
}

QString MainWindow::guiStateJson() const {
  GuiState state;
  state.cursor = context_.cursor();
  state.bookmarks = context_.bookmarks();
  state.values = panels_.kv->showingValues();
  state.query_head = panels_.attention->queryHead();
  return QString::fromUtf8(QJsonDocument(toJson(state)).toJson(QJsonDocument::Compact));
}

void MainWindow::applyGuiState(const QString& json) {
  const QJsonObject object = QJsonDocument::fromJson(json.toUtf8()).object();
  if (object.isEmpty()) return;
  // From the file: each field held against the trace; what does not fit is
  // named in the log and the status bar, never clamped in silence.
  QStringList warnings;
  GuiState state = guiStateFromJson(object, &warnings);
  if (context_.snapshot()) warnings << fitGuiState(state, *context_.snapshot());
  for (const QString& warning : warnings) spdlog::warn("trace: {}", warning.toStdString());
  if (!warnings.isEmpty()) statusBar()->showMessage(tr("trace: ") + warnings.join(QStringLiteral("; ")), 15000);
  gui_state_warnings_ = warnings;
  context_.setBookmarks(state.bookmarks);
  panels_.kv->setShowingValues(state.values);
  if (state.cursor.valid()) context_.setCursor(state.cursor);
  if (state.query_head >= 0) panels_.attention->setQueryHead(state.query_head);
}

void MainWindow::showError(const QString& what, const QString& message) {
  spdlog::error("{} failed: {}", what.toStdString(), message.toStdString());
  start_after_load_ = false;
  if (const StartupStep* step = startup_.current()) {
    spdlog::warn("start-up stopped before: {}", step->describe().toStdString());
    startup_.stop();
  }
  after_save_ = nullptr;  // a failed save (or anything else failing) replaces nothing, closes nothing
  auto* box = new QMessageBox(QMessageBox::Critical, what, what + tr(" failed"), QMessageBox::Ok, this);
  box->setObjectName(QStringLiteral("errorDialog"));
  box->setInformativeText(message);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::updateActions() {
  if (cursor_label_ == nullptr) return;  // still building the window
  const bool busy = controller_.busy();
  const SessionSnapshot* snapshot = context_.snapshot();
  const bool can_step = !busy && snapshot && !snapshot->finished && !snapshot->replay_only;
  const bool in_history = snapshot && context_.cursor().valid() && !context_.atLatest();
  step_phase_->setEnabled(can_step || in_history);
  step_round_->setEnabled(can_step || in_history);
  step_back_->setEnabled(snapshot && context_.cursor().round > 0);
  run_->setEnabled(controller_.running() || can_step);
  run_->setText(controller_.running() ? tr("Pause") : tr("Run"));
  run_->setIconText(controller_.running() ? tr("Pause (F5)") : tr("Run (F5)"));
  stop_->setEnabled(controller_.running());
  const Cursor& cursor = context_.cursor();
  back_->setEnabled(cursor.round > 0);
  forward_->setEnabled(snapshot && cursor.round < context_.latest().round);
  latest_->setEnabled(snapshot && !context_.atLatest());
  if (!snapshot || !cursor.valid()) {
    cursor_label_->setText(tr(" no session"));
    return;
  }
  QString text = QStringLiteral(" ") + tr("%1 \u00b7 after %2").arg(roundName(snapshot, cursor.round), QString::fromUtf8(phaseName(cursor.phase)));
  if (snapshot->replay_only) text += tr(" (replay)");
  else if (!context_.atLatest()) text += tr(" (history)");
  if (snapshot->finished) text += tr(" \u00b7 finished");
  if (context_.bookmarks().contains(cursor.round)) text += QStringLiteral(" \u2605");
  text += tr(" \u00b7 %1 layer %2 head %3").arg(QString::fromUtf8(cacheRoleName(cursor.cache))).arg(cursor.layer).arg(cursor.head);
  if (cursor.row >= 0) text += tr(" row %1").arg(cursor.row);
  if (cursor.position >= 0) text += tr(" \u00b7 position %1").arg(cursor.position);
  cursor_label_->setText(text);
}

void MainWindow::updateScrubber() {
  const QSignalBlocker block(scrubber_);
  scrubber_->setRange(0, static_cast<int>(std::max<int64_t>(0, context_.latest().round)));
  scrubber_->setValue(static_cast<int>(std::max<int64_t>(0, context_.cursor().round)));
}

void MainWindow::stepPhase() {
  hideFirstStartHint();
  if (!context_.stepHistory(false)) controller_.stepPhase();
}

void MainWindow::stepRound() {
  hideFirstStartHint();
  if (!context_.stepHistory(true)) controller_.stepRound();
}

void MainWindow::hideFirstStartHint() {
  if (!hint_ || hint_->isHidden()) return;
  hint_->hide();  // the user stepped: the hint did its job, for good
  QSettings().setValue(QStringLiteral("hints/firstStartSeen"), true);
}

void MainWindow::raisePanel(QWidget* panel) {
  for (QDockWidget* dock : docks_) {
    if (dock->widget() == panel) dock->raise();
  }
}

namespace {

// A live batch's sequences as the picker lists them: "sequence 2: 9 drafts
// accepted", with the one a diff named "root cause"; none for one sequence.
QStringList batchLabels(const SessionSnapshot& snapshot) {
  QStringList labels;
  if (snapshot.batch_accepted.size() < 2) return labels;
  const RootCause* cause = snapshot.diff && snapshot.diff->root_cause ? &*snapshot.diff->root_cause : nullptr;
  for (size_t b = 0; b < snapshot.batch_accepted.size(); ++b) {
    int64_t accepted = 0;
    for (int64_t n : snapshot.batch_accepted[b]) accepted += std::max<int64_t>(0, n);
    const bool named = cause && cause->sequence == static_cast<int64_t>(b);
    labels << (named ? MainWindow::tr("sequence %1: root cause").arg(b)
                     : MainWindow::tr("sequence %1: %2 drafts accepted").arg(b).arg(accepted));
  }
  return labels;
}

}  // namespace

void MainWindow::onSnapshot(SnapshotPtr snapshot, SnapshotReason reason) {
  const bool fresh = reason == SnapshotReason::NewSession || reason == SnapshotReason::Trace;
  const bool had_cursor = context_.cursor().valid();
  if (fresh) {
    context_.setBookmarks({});
    capture_paths_.clear();  // a capture's handler sets it again after its snapshot
    sequence_picker_->setSequences({}, 0);
    rank_picker_->setSequences({}, 0);
    if (snapshot && !snapshot->replay_only) setWindowTitle(tr("kvscope \u2014 KV cache debugger for speculative decoding"));
  }
  if (snapshot && !snapshot->from_capture) sequence_picker_->setSequences(batchLabels(*snapshot), static_cast<int>(snapshot->shown_sequence));
  if (snapshot && (fresh || reason == SnapshotReason::Diff)) panels_.session->showSession(*snapshot);
  if (fresh || reason == SnapshotReason::Diff) reproducible_rounds_ = 0;  // a lesson marks its own again
  trackUnsaved(snapshot.get(), reason);
  const bool finished = snapshot && snapshot->finished;
  context_.setSnapshot(std::move(snapshot), reason);
  // A diff with nowhere to stay (the first thing run): open on its root cause.
  if (reason == SnapshotReason::Diff && !had_cursor) {
    if (const Cursor cause = panels_.diff->rootCauseCursor(); cause.valid()) context_.setCursor(cause);
  }
  continueStartup(reason, finished);
}

void MainWindow::stepBy(int delta) {
  const int64_t round = context_.cursor().round + delta;
  if (round >= 0) context_.goToRound(round);
}

void MainWindow::rebuildBookmarkMenu() {
  bookmark_menu_->clear();
  bookmark_menu_->addAction(bookmark_);
  bookmark_menu_->addSeparator();
  const auto& bookmarks = context_.bookmarks();
  for (int i = 0; i < bookmarks.size(); ++i) {
    const int64_t round = bookmarks[i];
    QAction* jump = bookmark_menu_->addAction(tr("Round %1").arg(round), this, [this, round] { context_.goToRound(round); });
    if (i < 9) jump->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
    jump->setShortcutContext(Qt::WidgetShortcut);  // the window-wide Ctrl+N actions do the jumping
  }
  updateActions();
}


QDockWidget* MainWindow::dock(const QString& object_name) const { return findChild<QDockWidget*>(object_name); }

QDockWidget* MainWindow::dock(Panel panel) const { return dock(objectNameOf(panel)); }

void MainWindow::buildLessonMenu(QMenu* menu) {
  QAction* show = menu->addAction(tr("Show Lessons"), this, [this] {
    QDockWidget* lessons = dock(Panel::Lessons);
    lessons->show();
    lessons->raise();
  });
  show->setObjectName(QStringLiteral("showLessons"));
  QAction* next = menu->addAction(tr("Next Page"), this, [this] { panels_.lessons->next(); });
  next->setShortcut(QKeySequence(Qt::Key_PageDown));
  QAction* previous = menu->addAction(tr("Previous Page"), this, [this] { panels_.lessons->previous(); });
  previous->setShortcut(QKeySequence(Qt::Key_PageUp));
  menu->addSeparator();
  for (int i = 0; i < panels_.lessons->lessons().size(); ++i) {
    menu->addAction(tr("%1. %2").arg(i + 1).arg(panels_.lessons->lessons()[i].title), this, [this, i] { openLesson(i); });
  }
  menu->addSeparator();
  menu->addAction(tr("Open Lesson File\u2026"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open lesson"), QString(), tr("Lessons (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    if (!panels_.lessons->addLessonFile(path)) {
      showError(tr("Reading the lesson"), panels_.lessons->errors().last());
      return;
    }
    openLesson(static_cast<int>(panels_.lessons->lessons().size()) - 1);
  });
  // A bundled lesson that does not read says so once, naming file and field.
  if (!panels_.lessons->errors().isEmpty()) {
    QTimer::singleShot(0, this, [this] { showError(tr("Reading the lessons"), panels_.lessons->errors().join(QLatin1Char('\n'))); });
  }
}

void MainWindow::openLesson(int lesson, int page) {
  workspaces_->switchTo(Workspace::Teach);  // the lesson beside the stage its pages outline
  QDockWidget* lessons = dock(Panel::Lessons);
  lessons->show();
  lessons->raise();
  panels_.lessons->openPage(lesson, page);
}

void MainWindow::startLessonSession(bool diff) {
  replaceSession(tr("Save the trace before the lesson starts its session?"), [this, diff] {
    const auto spec = panelSession();
    if (!spec) return;
    if (diff) controller_.runDiff(*spec);
    else controller_.startSession(*spec);
  });
}

void MainWindow::markReproducible(int64_t rounds) {
  reproducible_rounds_ = rounds;
  if (const SessionSnapshot* snapshot = context_.snapshot(); snapshot && snapshot->lastRound() <= rounds) unsaved_ = false;
}

void MainWindow::buildViewActions() {
  QMenu* zoom = view_menu_->addMenu(tr("Presenter &Zoom"));
  QAction* in = zoom->addAction(tr("Zoom In"), this, [this] { setPresenterZoom(presenterZoom() + 25); });
  in->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Equal), QKeySequence(Qt::CTRL | Qt::Key_Plus)});
  QAction* out = zoom->addAction(tr("Zoom Out"), this, [this] { setPresenterZoom(presenterZoom() - 25); });
  out->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Minus));
  QAction* reset = zoom->addAction(tr("Actual Size (100%)"), this, [this] { setPresenterZoom(100); });
  reset->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  zoom->addSeparator();
  for (int percent = kMinPresenterZoom; percent <= kMaxPresenterZoom; percent += 25) {
    zoom->addAction(QStringLiteral("%1%").arg(percent), this, [this, percent] { setPresenterZoom(percent); });
  }
  view_menu_->addSeparator();
}

void MainWindow::setPresenterZoom(int percent) {
  const int before = presenterZoom();
  workspaces_->zoomChanging(before);
  applyPresenterZoom(this, percent);
  workspaces_->zoomChanged(presenterZoom());
  QSettings().setValue(QStringLiteral("view/presenterZoom"), presenterZoom());
}

int MainWindow::presenterZoom() const { return kvscope::ui::presenterZoom(this); }

void MainWindow::buildHelpMenu(QMenu* help) {
  help->addAction(tr("&Glossary"), this, [this] { showGlossary(this); })->setShortcut(QKeySequence(Qt::Key_F1));
  help->addAction(tr("&About kvscope"), this, [this] {
    QMessageBox::about(this, tr("About kvscope"), aboutText());
  });
}

void MainWindow::showFirstStartHint() {
  hint_ = new QLabel(tr("F10: step one phase \u00b7 F11: one round \u00b7 F5: run \u00b7 PgDn: next lesson page "
                        "\u00b7 Ctrl+=: presenter zoom \u00b7 F1: glossary"));
  hint_->setObjectName(QStringLiteral("firstStartHint"));
  hint_->setStyleSheet(QStringLiteral("QLabel { color:#805000; }"));
  statusBar()->addWidget(hint_);
  hint_->setVisible(!QSettings().value(QStringLiteral("hints/firstStartSeen"), false).toBool());
}

}  // namespace kvscope::ui

