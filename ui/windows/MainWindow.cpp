#include "ui/windows/MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QSignalBlocker>
#include <QSlider>
#include <QStatusBar>
#include <QToolBar>

#include <spdlog/spdlog.h>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/AttentionPanel.h"
#include "ui/windows/DiffPanel.h"
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
  QSize size(1600, 1000);  // the first run's size; later runs restore the saved geometry
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    size = size.boundedTo(screen->availableGeometry().size());
  }
  resize(size);

  session_ = new SessionPanel(context_);
  timeline_ = new TimelinePanel(context_);
  tokens_ = new TokenStripPanel(context_);
  kv_ = new KvCachePanel(context_);
  attention_ = new AttentionPanel(context_);
  diff_ = new DiffPanel(context_);
  log_ = new LogPanel;

  buildActions();
  buildLayout();
  connectEngine();

  // Panels send requests; the context (owned here) changes.
  connect(timeline_, &TimelinePanel::roundRequested, this, [this](qint64 round) { context_.goToRound(round); });
  connect(tokens_, &TokenStripPanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p); });
  connect(kv_, &KvCachePanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p, kv_); });
  connect(attention_, &AttentionPanel::positionRequested, this, [this](qint64 p) { context_.selectPosition(p); });
  connect(diff_, &DiffPanel::runDiffRequested, this, [this] { controller_.runDiff(session_->sessionSpec()); });
  connect(diff_, &DiffPanel::badCellRequested, this, &MainWindow::goToBadCell);
  connect(diff_, &DiffPanel::auditRequested, this, [this] { controller_.auditNow(); });
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
    pending_rounds_ = options_.initial_rounds;
    session_->setModelDirs(QString::fromStdString(options_.models.target_dir),
                           QString::fromStdString(options_.models.drafter_dir));
    if (!options_.fault.isEmpty()) session_->setFault(options_.fault);
    if (!options_.prompt.isEmpty()) session_->setPrompt(options_.prompt);
    if (options_.max_new_tokens > 0) session_->setMaxNewTokens(options_.max_new_tokens);
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
  file->addAction(tr("&Open Trace\u2026"), QKeySequence::Open, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), tr("kvscope traces (*.kvtrace);;All files (*)"));
    if (!path.isEmpty()) openTrace(path);
  });
  file->addAction(tr("&Save Trace As\u2026"), QKeySequence::Save, this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Save trace"), QStringLiteral("session.kvtrace"), tr("kvscope traces (*.kvtrace)"));
    if (path.isEmpty()) return;
    if (!path.endsWith(QStringLiteral(".kvtrace"))) path += QStringLiteral(".kvtrace");
    saveTrace(path);
  });
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
  debug->addAction(tr("Run Diff (cached vs uncached)"), this, [this] { controller_.runDiff(session_->sessionSpec()); });
  debug->addAction(tr("Audit Cache Now"), this, [this] { controller_.auditNow(); });
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
  auto* session_scroll = new QScrollArea;  // the form is tall: let it scroll on small screens
  session_scroll->setWidget(session_);
  session_scroll->setWidgetResizable(true);
  session_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  session_scroll->setFrameShape(QFrame::NoFrame);
  QDockWidget* session = addPanel(session_scroll, tr("Session"), QStringLiteral("sessionDock"));
  QDockWidget* timeline = addPanel(timeline_, tr("Round Timeline"), QStringLiteral("timelineDock"));
  QDockWidget* tokens = addPanel(tokens_, tr("Tokens"), QStringLiteral("tokensDock"));
  QDockWidget* kv = addPanel(kv_, tr("KV Cache"), QStringLiteral("kvDock"));
  QDockWidget* attention = addPanel(attention_, tr("Verify Attention"), QStringLiteral("attentionDock"));
  QDockWidget* diff = addPanel(diff_, tr("Cache Diff"), QStringLiteral("diffDock"));
  QDockWidget* log = addPanel(log_, tr("Log"), QStringLiteral("logDock"));
  view_menu_->addSeparator();
  view_menu_->addAction(tr("Reset Layout"), this, &MainWindow::resetLayout);

  addDockWidget(Qt::LeftDockWidgetArea, session);
  addDockWidget(Qt::RightDockWidgetArea, timeline);
  splitDockWidget(timeline, tokens, Qt::Vertical);
  splitDockWidget(tokens, kv, Qt::Vertical);
  splitDockWidget(kv, attention, Qt::Vertical);
  tabifyDockWidget(attention, diff);
  tabifyDockWidget(diff, log);
  attention->raise();
  resizeDocks({session, timeline}, {390, 1210}, Qt::Horizontal);
  resizeDocks({timeline, tokens, kv, attention}, {200, 80, 450, 200}, Qt::Vertical);
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
              if (options_.run_diff) {
                options_.run_diff = false;
                pending_rounds_ = 0;
                controller_.runDiff(session_->sessionSpec());
                for (QDockWidget* dock : docks_) {
                  if (dock->widget() == diff_) dock->raise();
                }
              } else {
                controller_.startSession(session_->sessionSpec());
              }
            }
          });
  connect(&controller_, &EngineController::snapshotReady, this, [this](SnapshotPtr snapshot, bool new_session) {
    if (new_session) {
      context_.setBookmarks({});
      if (snapshot && !snapshot->replay_only) setWindowTitle(tr("kvscope \u2014 KV cache debugger for speculative decoding"));
    }
    const bool finished = snapshot && snapshot->finished;
    const std::shared_ptr<const DiffData> diff = new_session && snapshot ? snapshot->diff : nullptr;
    context_.setSnapshot(std::move(snapshot), true);
    if (diff && diff->diverged) {  // a diff run: show where it first went wrong
      Cursor cursor;
      cursor.round = diff->divergence_round;
      cursor.phase = diff->divergence_cache == CacheRole::Target ? Phase::Verify : Phase::Draft;
      cursor.position = diff->divergence_position;
      context_.setCursor(cursor);
    }
    if (pending_rounds_ > 0 && !finished) {
      --pending_rounds_;
      controller_.stepRound();
    } else if (pending_rounds_ >= 0 && options_.select_round != -1) {
      pending_rounds_ = -1;  // done: select once
      int64_t round = options_.select_round;
      int64_t position = options_.select_position;
      if (round == MainWindowOptions::kFirstRejection && context_.snapshot()) {
        round = -1;
        for (const RoundRecord& record : context_.snapshot()->rounds) {
          if (record.index >= 1 && record.accepted < static_cast<int64_t>(record.drafts.size())) {
            round = record.index;
            if (position == MainWindowOptions::kFirstRejection) position = record.start_length + record.accepted;
            break;
          }
        }
      }
      if (position == MainWindowOptions::kFirstRejection && round >= 1 && context_.snapshot()) {
        if (const RoundRecord* record = context_.snapshot()->round(round)) position = record->start_length + record->accepted;
      }
      if (round >= 0) context_.goToRound(round);
      if (position >= 0) context_.selectPosition(position);
    }
  });
  connect(&controller_, &EngineController::failed, this, &MainWindow::showError);
  connect(&controller_, &EngineController::traceSaved, this,
          [this](const QString& path) { statusBar()->showMessage(tr("saved %1").arg(path), 8000); });
  connect(&controller_, &EngineController::traceOpened, this, [this](const QString& path, const QString& gui) {
    applyGuiState(gui);
    setWindowTitle(tr("kvscope \u2014 %1 (replay)").arg(path));
  });
}

void MainWindow::saveTrace(const QString& path) { controller_.saveTrace(path, guiStateJson()); }

void MainWindow::openTrace(const QString& path) {
  pending_rounds_ = -1;
  controller_.openTrace(path);
}

QString MainWindow::guiStateJson() const {
  const Cursor& cursor = context_.cursor();
  QJsonObject state;
  state[QStringLiteral("round")] = static_cast<qint64>(cursor.round);
  state[QStringLiteral("phase")] = static_cast<int>(cursor.phase);
  state[QStringLiteral("position")] = static_cast<qint64>(cursor.position);
  QJsonArray bookmarks;
  for (int64_t round : context_.bookmarks()) bookmarks.append(static_cast<qint64>(round));
  state[QStringLiteral("bookmarks")] = bookmarks;
  state[QStringLiteral("values")] = kv_->showingValues();
  state[QStringLiteral("target_layer")] = kv_->targetView()->layer();
  state[QStringLiteral("target_head")] = kv_->targetView()->head();
  state[QStringLiteral("drafter_layer")] = kv_->drafterView()->layer();
  state[QStringLiteral("drafter_head")] = kv_->drafterView()->head();
  return QString::fromUtf8(QJsonDocument(state).toJson(QJsonDocument::Compact));
}

void MainWindow::applyGuiState(const QString& json) {
  const QJsonObject state = QJsonDocument::fromJson(json.toUtf8()).object();
  if (state.isEmpty()) return;
  QVector<int64_t> bookmarks;
  for (const QJsonValue& round : state.value(QStringLiteral("bookmarks")).toArray()) bookmarks.push_back(round.toInteger());
  context_.setBookmarks(bookmarks);
  kv_->flushRefresh();  // the selectors know the geometry
  kv_->setShowingValues(state.value(QStringLiteral("values")).toBool());
  kv_->targetView()->setLayerHead(state.value(QStringLiteral("target_layer")).toInt(), state.value(QStringLiteral("target_head")).toInt());
  kv_->drafterView()->setLayerHead(state.value(QStringLiteral("drafter_layer")).toInt(), state.value(QStringLiteral("drafter_head")).toInt());
  Cursor cursor;
  cursor.round = state.value(QStringLiteral("round")).toInteger(-1);
  cursor.phase = static_cast<Phase>(state.value(QStringLiteral("phase")).toInt());
  cursor.position = state.value(QStringLiteral("position")).toInteger(-1);
  if (cursor.round >= 0) context_.setCursor(cursor);
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
  if (cursor_label_ == nullptr) return;  // still building the window
  const bool busy = controller_.busy();
  const SessionSnapshot* snapshot = context_.snapshot();
  const bool can_step = !busy && snapshot && !snapshot->finished && !snapshot->replay_only;
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
  if (snapshot->replay_only) text += tr(" (replay)");
  else if (!context_.atLatest()) text += tr(" (history)");
  if (snapshot->finished) text += tr(" \u00b7 finished");
  if (context_.bookmarks().contains(cursor.round)) text += QStringLiteral(" \u2605");
  cursor_label_->setText(text);
}

void MainWindow::updateScrubber() {
  const QSignalBlocker block(scrubber_);
  scrubber_->setRange(0, static_cast<int>(std::max<int64_t>(0, context_.latest().round)));
  scrubber_->setValue(static_cast<int>(std::max<int64_t>(0, context_.cursor().round)));
}

void MainWindow::goToBadCell(qint64 round, qint64 position, int cache, int layer, int head) {
  KvHeatmapView* view = cache == static_cast<int>(CacheRole::Target) ? kv_->targetView() : kv_->drafterView();
  if (layer >= 0 && head >= 0) view->setLayerHead(layer, head);
  Cursor cursor;
  cursor.round = round;
  cursor.phase = cache == static_cast<int>(CacheRole::Target) ? Phase::Verify : Phase::Draft;
  cursor.position = position;
  context_.setCursor(cursor);
  for (QDockWidget* dock : docks_) {
    if (dock->widget() == kv_) dock->raise();
  }
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
