#include "ui/windows/MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QSignalBlocker>
#include <QSlider>
#include <QStatusBar>
#include <QToolBar>

#include <spdlog/spdlog.h>

#include "ui/windows/AttentionPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/LogPanel.h"
#include "ui/windows/SessionPanel.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

MainWindow::MainWindow(const MainWindowOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options) {
  setWindowTitle(tr("kvscope \u2014 KV cache debugger for speculative decoding"));
  setObjectName(QStringLiteral("kvscopeMainWindow"));
  setDockNestingEnabled(true);
  resize(1600, 1000);

  session_ = new SessionPanel(context_);
  timeline_ = new TimelinePanel(context_);
  tokens_ = new TokenStripPanel(context_);
  kv_ = new KvCachePanel(context_);
  attention_ = new AttentionPanel(context_);
  log_ = new LogPanel;

  buildActions();
  buildLayout();
  connectEngine();

  // Panels send requests; the context (owned here) changes.
  connect(timeline_, &TimelinePanel::roundRequested, this, [this](qint64 round) { context_.goToRound(round); });
  connect(tokens_, &TokenStripPanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p); });
  connect(kv_, &KvCachePanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p, kv_); });
  connect(attention_, &AttentionPanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p); });
  connect(session_, &SessionPanel::loadRequested, this, [this](const UiModelSpec& spec) {
    start_after_load_ = true;
    controller_.loadModels(spec);
  });
  connect(session_, &SessionPanel::startRequested, this,
          [this](const UiSessionSpec& spec) { controller_.startSession(spec); });
  connect(&context_, &DebuggerContext::cursorChanged, this, [this] {
    updateScrubber();
    updateActions();
  });
  connect(&context_, &DebuggerContext::bookmarksChanged, this, &MainWindow::rebuildBookmarkMenu);

  default_state_ = saveState();
  if (options_.restore_layout) {
    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
  }
  updateActions();
  if (options_.load_on_start) {
    start_after_load_ = true;
    session_->setModelDirs(QString::fromStdString(options_.models.target_dir),
                           QString::fromStdString(options_.models.drafter_dir));
    controller_.loadModels(options_.models);
  }
}

MainWindow::~MainWindow() {
  controller_.stop();
  // Panels unregister from the context in their destructors: delete them
  // while the context (a member) is still alive.
  qDeleteAll(docks_);
  docks_.clear();
}

QDockWidget* MainWindow::addPanel(QWidget* panel, const QString& title, const QString& name) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(name);
  dock->setWidget(panel);
  docks_.push_back(dock);
  view_menu_->addAction(dock->toggleViewAction());
  return dock;
}

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QMenu* debug = menuBar()->addMenu(tr("&Debug"));
  bookmark_menu_ = menuBar()->addMenu(tr("&Bookmarks"));
  view_menu_ = menuBar()->addMenu(tr("&View"));
  QMenu* help = menuBar()->addMenu(tr("&Help"));

  QAction* load = file->addAction(tr("&Load Models"), this, [this] {
    start_after_load_ = true;
    controller_.loadModels(session_->modelSpec());
  });
  load->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  QAction* restart = file->addAction(tr("&Start Session"), this, [this] { controller_.startSession(session_->sessionSpec()); });
  restart->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  run_ = debug->addAction(tr("Run"), this, [this] {
    if (controller_.running()) controller_.stop();
    else controller_.run();
  });
  run_->setShortcut(Qt::Key_F5);
  stop_ = debug->addAction(tr("Stop"), this, [this] { controller_.stop(); });
  stop_->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F5));
  step_phase_ = debug->addAction(tr("Step Phase"), this, [this] { controller_.stepPhase(); });
  step_phase_->setShortcut(Qt::Key_F10);
  step_round_ = debug->addAction(tr("Step Round"), this, [this] { controller_.stepRound(); });
  step_round_->setShortcut(Qt::Key_F11);
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

  QToolBar* bar = addToolBar(tr("Debug"));
  bar->setObjectName(QStringLiteral("debugToolbar"));
  for (QAction* action : {run_, stop_, step_phase_, step_round_}) bar->addAction(action);
  bar->addSeparator();
  for (QAction* action : {back_, forward_, latest_, bookmark_}) bar->addAction(action);
  scrubber_ = new QSlider(Qt::Horizontal);
  scrubber_->setObjectName(QStringLiteral("roundScrubber"));
  scrubber_->setMinimumWidth(240);
  scrubber_->setRange(0, 0);
  scrubber_->setToolTip(tr("Round scrubber: drag through the recorded rounds"));
  connect(scrubber_, &QSlider::valueChanged, this, [this](int round) { context_.goToRound(round); });
  bar->addWidget(new QLabel(tr("  Round ")));
  bar->addWidget(scrubber_);
  cursor_label_ = new QLabel;
  cursor_label_->setMinimumWidth(260);
  bar->addWidget(cursor_label_);

  help->addAction(tr("&About kvscope"), this, [this] {
    QMessageBox::about(this, tr("About kvscope"),
                       tr("kvscope: step through speculative decoding rounds and look at the KV cache."));
  });
  busy_label_ = new QLabel;
  statusBar()->addPermanentWidget(busy_label_);
}

void MainWindow::buildLayout() {
  QDockWidget* session = addPanel(session_, tr("Session"), QStringLiteral("sessionDock"));
  QDockWidget* timeline = addPanel(timeline_, tr("Round Timeline"), QStringLiteral("timelineDock"));
  QDockWidget* tokens = addPanel(tokens_, tr("Tokens"), QStringLiteral("tokensDock"));
  QDockWidget* kv = addPanel(kv_, tr("KV Cache"), QStringLiteral("kvDock"));
  QDockWidget* attention = addPanel(attention_, tr("Verify Attention"), QStringLiteral("attentionDock"));
  QDockWidget* log = addPanel(log_, tr("Log"), QStringLiteral("logDock"));
  view_menu_->addSeparator();
  view_menu_->addAction(tr("Reset Layout"), this, &MainWindow::resetLayout);

  addDockWidget(Qt::LeftDockWidgetArea, session);
  addDockWidget(Qt::RightDockWidgetArea, timeline);
  splitDockWidget(timeline, tokens, Qt::Vertical);
  splitDockWidget(tokens, kv, Qt::Vertical);
  splitDockWidget(kv, attention, Qt::Vertical);
  addDockWidget(Qt::LeftDockWidgetArea, log);
  splitDockWidget(session, log, Qt::Vertical);
  resizeDocks({session, timeline}, {380, 1200}, Qt::Horizontal);
  resizeDocks({timeline, tokens, kv, attention}, {170, 120, 430, 230}, Qt::Vertical);
  resizeDocks({session, log}, {700, 250}, Qt::Vertical);
}

void MainWindow::resetLayout() {
  for (QDockWidget* dock : docks_) dock->show();
  restoreState(default_state_);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  controller_.stop();
  event->accept();
}

void MainWindow::connectEngine() {
  connect(&controller_, &EngineController::busyChanged, this, [this](bool busy, const QString& what) {
    session_->setBusy(busy, what);
    busy_label_->setText(busy ? what + QStringLiteral("\u2026") : tr("ready"));
    updateActions();
  });
  connect(&controller_, &EngineController::runningChanged, this, [this] { updateActions(); });
  connect(&controller_, &EngineController::progress, session_, &SessionPanel::setProgress);
  connect(&controller_, &EngineController::modelsLoaded, this,
          [this](const QString& target, const QString& drafter_dir, const QString& drafter_name, const QStringList& notes) {
            session_->setLoadedModels(target, drafter_name);
            for (const QString& note : notes) statusBar()->showMessage(note, 15000);
            const UiModelSpec spec = session_->modelSpec();
            if (!spec.target_dir.empty()) session_->rememberRecent(target);
            if (!spec.drafter_dir.empty() && !drafter_dir.isEmpty()) session_->rememberRecent(drafter_dir);
            if (start_after_load_) {
              start_after_load_ = false;
              controller_.startSession(session_->sessionSpec());
            }
          });
  connect(&controller_, &EngineController::snapshotReady, this, [this](SnapshotPtr snapshot, bool new_session) {
    if (new_session) context_.setBookmarks({});
    context_.setSnapshot(std::move(snapshot), true);
  });
  connect(&controller_, &EngineController::failed, this, &MainWindow::showError);
}

void MainWindow::showError(const QString& what, const QString& message) {
  start_after_load_ = false;
  auto* box = new QMessageBox(QMessageBox::Critical, what, what + tr(" failed"), QMessageBox::Ok, this);
  box->setObjectName(QStringLiteral("errorDialog"));
  box->setInformativeText(message);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::updateActions() {
  const bool busy = controller_.busy();
  const SessionSnapshot* snapshot = context_.snapshot();
  const bool can_step = !busy && snapshot && !snapshot->finished;
  step_phase_->setEnabled(can_step);
  step_round_->setEnabled(can_step);
  run_->setEnabled(controller_.running() || can_step);
  run_->setText(controller_.running() ? tr("Pause") : tr("Run"));
  stop_->setEnabled(controller_.running());
  const Cursor& cursor = context_.cursor();
  back_->setEnabled(cursor.round > 0);
  forward_->setEnabled(snapshot && cursor.round < context_.latest().round);
  latest_->setEnabled(snapshot && !context_.atLatest());
  if (!snapshot || !cursor.valid()) {
    cursor_label_->setText(tr(" no session"));
    return;
  }
  QString text = tr(" round %1 \u00b7 after %2").arg(cursor.round).arg(QString::fromUtf8(phaseName(cursor.phase)));
  if (!context_.atLatest()) text += tr(" (history)");
  if (snapshot->finished) text += tr(" \u00b7 finished");
  if (context_.bookmarks().contains(cursor.round)) text += QStringLiteral(" \u2605");
  cursor_label_->setText(text);
}

void MainWindow::updateScrubber() {
  const QSignalBlocker block(scrubber_);
  scrubber_->setRange(0, static_cast<int>(std::max<int64_t>(0, context_.latest().round)));
  scrubber_->setValue(static_cast<int>(std::max<int64_t>(0, context_.cursor().round)));
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

}  // namespace kvscope::ui
