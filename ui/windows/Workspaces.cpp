#include "ui/windows/Workspaces.h"

#include <QAction>
#include <QActionGroup>
#include <QDockWidget>
#include <QEvent>
#include <QMainWindow>
#include <QSettings>
#include <QTabBar>
#include <QTimer>

#include <algorithm>

namespace kvscope::ui {

namespace {
constexpr int kStateVersion = 27;  // QMainWindow::saveState's version: states of older layouts are not restored

}  // namespace

Workspaces::Workspaces(QMainWindow* window, QList<QDockWidget*> docks)
    : QObject(window), window_(window), docks_(std::move(docks)), group_(new QActionGroup(this)) {
  int index = 0;
  for (Workspace workspace : all()) {
    auto* action = new QAction(title(workspace), this);
    action->setObjectName(QStringLiteral("workspace_%1").arg(name(workspace)));
    action->setCheckable(true);
    action->setShortcut(QKeySequence(Qt::ALT | static_cast<Qt::Key>(Qt::Key_1 + index++)));
    action->setShortcutContext(Qt::WindowShortcut);
    static const char* const kWhat[] = {
        "Debug workspace: session, timeline, tokens, KV cache, attention, diff and row history at once",
        "Teach workspace: the lesson beside one large stage; each page brings the panel it talks about to the front",
        "Compress workspace: the Compression panel large, the session form beside it",
        "Capture workspace: the Cache Diff (root cause, audit) over the KV cache, the row history beside them"};
    action->setToolTip(tr("%1 (%2)").arg(tr(kWhat[index - 1]), action->shortcut().toString(QKeySequence::NativeText)));
    group_->addAction(action);
    actions_[workspace] = action;
    connect(action, &QAction::triggered, this, [this, workspace] { switchTo(workspace); });
  }
  window_->installEventFilter(this);
  arrange(Workspace::Debug);
  markChecked();
}

QList<Workspace> Workspaces::all() { return {Workspace::Debug, Workspace::Teach, Workspace::Compress, Workspace::Capture}; }

QString Workspaces::name(Workspace workspace) {
  switch (workspace) {
    case Workspace::Debug: return QStringLiteral("debug");
    case Workspace::Teach: return QStringLiteral("teach");
    case Workspace::Compress: return QStringLiteral("compress");
    case Workspace::Capture: return QStringLiteral("capture");
  }
  return {};
}

QString Workspaces::title(Workspace workspace) {
  const QString n = name(workspace);
  return n.left(1).toUpper() + n.mid(1);
}

bool Workspaces::parse(const QString& text, Workspace* workspace) {
  for (Workspace w : all()) {
    if (name(w) == text.trimmed().toLower()) {
      *workspace = w;
      return true;
    }
  }
  return false;
}

QList<QAction*> Workspaces::actions() const {
  QList<QAction*> list;
  for (Workspace w : all()) list << actions_.value(w);
  return list;
}

QAction* Workspaces::action(Workspace workspace) const { return actions_.value(workspace); }

QDockWidget* Workspaces::dock(Panel panel) const {
  const QString name = objectNameOf(panel);
  for (QDockWidget* d : docks_) {
    if (d->objectName() == name) return d;
  }
  return nullptr;
}

QString Workspaces::key(Workspace workspace, int zoom, QSize size) const {
  if (!size.isValid()) size = window_->size();
  QString k = QStringLiteral("%1/%2x%3").arg(name(workspace)).arg(size.width()).arg(size.height());
  if (zoom != 100) k += QStringLiteral("@%1").arg(zoom);
  return k;
}

void Workspaces::keep() {
  // Before the first show the docks have no real sizes: nothing worth keeping.
  if (window_->isVisible()) kept_[key(current_, zoom_)] = window_->saveState(kStateVersion);
}

void Workspaces::switchTo(Workspace workspace) {
  if (workspace == current_) {
    markChecked();
    return;
  }
  keep();
  current_ = workspace;
  const auto kept = kept_.constFind(key(workspace, zoom_));
  if (kept != kept_.constEnd()) restoreKept(*kept, window_->size());
  else arrange(workspace);
  markChecked();
  emit switched(workspace);
}

void Workspaces::reset() {
  kept_.remove(key(current_, zoom_));
  arrange(current_);
}

void Workspaces::markChecked() {
  if (QAction* a = actions_.value(current_)) a->setChecked(true);
}

void Workspaces::zoomChanging(int from) {
  keep();
  window_at_zoom_[QStringLiteral("%1@%2").arg(name(current_)).arg(from)] = window_->size();
  zoom_ = from;
}

void Workspaces::zoomChanged(int to) {
  zoom_ = to;
  // A zoom the window was at before: its size (a large zoom may have grown the
  // window; the resize of a shown window lands later) and its arrangement.
  QSize size = window_at_zoom_.value(QStringLiteral("%1@%2").arg(name(current_)).arg(to));
  if (!size.isValid() || window_->isMaximized() || window_->isFullScreen()) size = window_->size();
  if (size != window_->size()) {
    window_->resize(size);
    // Again once the layout's minimum follows the smaller fonts (until then it may refuse).
    QTimer::singleShot(0, this, [this, size] { window_->resize(size); });
  }
  const auto kept = kept_.constFind(key(current_, to, size));
  if (kept != kept_.constEnd()) {
    restoreKept(*kept, size);
  } else {
    // New minimum sizes squeeze some docks: share the window out as the workspace does.
    QTimer::singleShot(0, this, [this] { applyDefaultSizes(); });
  }
}

void Workspaces::restoreKept(const QByteArray& state, QSize at) {
  defaults_pending_ = false;
  if (!at.isValid()) at = window_->size();
  if (window_->size() == at) window_->restoreState(state, kStateVersion);
  // Again once the layout took the new fonts and size (minimum sizes change
  // with the zoom; a panel sizes a box to its text once it has its width),
  // until that settled: each pass is cheap and changes nothing once it holds.
  for (int delay : {0, 30, 120, 300}) {
    QTimer::singleShot(delay, this, [this, state, at] {
      if (window_->size() == at) window_->restoreState(state, kStateVersion);
    });
  }
}

void Workspaces::save(QSettings& settings) {
  keep();
  settings.setValue(QStringLiteral("workspaces/current"), name(current_));
  settings.beginGroup(QStringLiteral("workspaces/states"));
  for (auto it = kept_.constBegin(); it != kept_.constEnd(); ++it) {
    QString k = it.key();
    settings.setValue(k.replace(QLatin1Char('/'), QLatin1Char('_')), it.value());
  }
  settings.endGroup();
}

void Workspaces::restore(QSettings& settings) {
  settings.beginGroup(QStringLiteral("workspaces/states"));
  for (const QString& k : settings.childKeys()) {
    QString original = k;
    const qsizetype slash = original.indexOf(QLatin1Char('_'));
    if (slash > 0) original[slash] = QLatin1Char('/');
    kept_[original] = settings.value(k).toByteArray();
  }
  settings.endGroup();
  Workspace saved = Workspace::Debug;
  parse(settings.value(QStringLiteral("workspaces/current")).toString(), &saved);
  current_ = saved;
  const auto kept = kept_.constFind(key(saved, zoom_));
  if (kept != kept_.constEnd() && window_->restoreState(*kept, kStateVersion)) defaults_pending_ = false;
  else arrange(saved);
  markChecked();
}

bool Workspaces::eventFilter(QObject* watched, QEvent* event) {
  // Before the first show the docks have no real sizes: a default arrangement is sized once shown.
  if (watched == window_ && event->type() == QEvent::Show && !sized_once_shown_) {
    sized_once_shown_ = true;
    if (defaults_pending_) {
      QTimer::singleShot(0, this, [this] { applyDefaultSizes(); });
    }
  }
  return false;
}

void Workspaces::bringForwardIfTabbed(Panel panel) {
  QDockWidget* d = dock(panel);
  if (d->isHidden() || d->isFloating() || window_->tabifiedDockWidgets(d).isEmpty()) return;
  if (!d->visibleRegion().isEmpty()) return;
  d->raise();
}

void Workspaces::arrange(Workspace workspace) {
  defaults_pending_ = true;
  for (QDockWidget* d : docks_) {
    d->setFloating(false);
    window_->removeDockWidget(d);
  }
  switch (workspace) {
    case Workspace::Debug: arrangeDebug(); break;
    case Workspace::Teach: arrangeTeach(); break;
    case Workspace::Compress: arrangeCompress(); break;
    case Workspace::Capture: arrangeCapture(); break;
  }
  const Panel stage = stageOf(workspace);
  tabInto(workspace, Place::Spot::Stage, stage);
  if (const auto side = sideOf(workspace)) tabInto(workspace, Place::Spot::Side, *side);
  for (const PanelRow& row : panelTable()) dock(row.panel)->setVisible(placeIn(row, workspace).spot != Place::Spot::Hidden);
  // A dock this job does not show still gets a place (hidden, behind the
  // stage): a saved arrangement then names every dock, and restoring it never
  // leaves one where another workspace had put it. View > its name brings it back there.
  for (QDockWidget* d : docks_) {
    if (window_->dockWidgetArea(d) != Qt::NoDockWidgetArea) continue;
    window_->tabifyDockWidget(dock(stage), d);
    d->hide();
  }
  // The docks in front of their tab groups.
  QList<Panel> front;
  switch (workspace) {
    case Workspace::Debug: front = {Panel::Session, Panel::Attention, Panel::Tokens}; break;
    case Workspace::Teach: front = {Panel::Lessons, stage}; break;
    case Workspace::Compress: front = {Panel::Session, stage}; break;
    case Workspace::Capture: front = {Panel::Session, Panel::Diff, stage}; break;
  }
  const bool narrow = window_->width() < 1200;
  if (narrow && (workspace == Workspace::Debug || workspace == Workspace::Capture)) front << Panel::RowHistory;
  for (Panel panel : front) dock(panel)->raise();
  applyDefaultSizes();
  // Once the layout holds the new arrangement (shown or not yet), its sizes again.
  QTimer::singleShot(0, this, [this] {
    if (defaults_pending_) applyDefaultSizes();
  });
}

Place Workspaces::placeIn(const PanelRow& row, Workspace workspace) {
  switch (workspace) {
    case Workspace::Debug: return row.places.debug;
    case Workspace::Teach: return row.places.teach;
    case Workspace::Compress: return row.places.compress;
    case Workspace::Capture: return row.places.capture;
  }
  return Place::hidden();
}

Panel Workspaces::stageOf(Workspace workspace) {
  switch (workspace) {
    case Workspace::Debug: return Panel::Attention;  // the analyses of the session, tabbed
    case Workspace::Compress: return Panel::Compression;
    case Workspace::Teach:
    case Workspace::Capture: return Panel::Kv;
  }
  return Panel::Kv;
}

std::optional<Panel> Workspaces::sideOf(Workspace workspace) {
  switch (workspace) {
    case Workspace::Debug: return Panel::Session;
    case Workspace::Teach: return Panel::Lessons;
    case Workspace::Compress:
    case Workspace::Capture: return std::nullopt;
  }
  return std::nullopt;
}

void Workspaces::tabInto(Workspace workspace, Place::Spot spot, Panel anchor) {
  QList<const PanelRow*> rows;
  for (const PanelRow& row : panelTable()) {
    if (placeIn(row, workspace).spot == spot) rows << &row;
  }
  std::stable_sort(rows.begin(), rows.end(), [workspace](const PanelRow* a, const PanelRow* b) {
    return placeIn(*a, workspace).tab < placeIn(*b, workspace).tab;
  });
  for (const PanelRow* row : rows) window_->tabifyDockWidget(dock(anchor), dock(row->panel));
}

void Workspaces::arrangeDebug() {
  QDockWidget* session = dock(Panel::Session);
  QDockWidget* timeline = dock(Panel::Timeline);
  QDockWidget* tokens = dock(Panel::Tokens);
  QDockWidget* kv = dock(Panel::Kv);
  QDockWidget* history = dock(Panel::RowHistory);
  QDockWidget* attention = dock(Panel::Attention);
  // Small screens (720p laptops): the timeline and the tokens share a tab
  // under the session form, so the caches, the diff and the row history get
  // the full height of the right side. A narrow screen (1024 wide) has no
  // room for a third column: the row history joins that tab group too.
  const bool narrow = window_->width() < 1200;
  const bool compact = narrow || window_->height() < 900;
  window_->addDockWidget(Qt::LeftDockWidgetArea, session);
  if (compact) {
    window_->splitDockWidget(session, timeline, Qt::Vertical);
    window_->splitDockWidget(timeline, tokens, Qt::Vertical);
    window_->addDockWidget(Qt::RightDockWidgetArea, kv);
  } else {
    window_->addDockWidget(Qt::RightDockWidgetArea, timeline);
    window_->splitDockWidget(timeline, tokens, Qt::Vertical);
    window_->splitDockWidget(tokens, kv, Qt::Vertical);
  }
  // The row history beside the cache and the diff, the full height of both:
  // it explains whichever row either of them selects.
  if (narrow) window_->splitDockWidget(tokens, history, Qt::Vertical);
  else window_->splitDockWidget(kv, history, Qt::Horizontal);
  // Verify Attention under the cache: the stage its analyses (the diff,
  // the compression lab, the log) are tabbed on.
  window_->splitDockWidget(kv, attention, Qt::Vertical);
  if (compact) window_->tabifyDockWidget(timeline, tokens);  // after the splits: a tab group cannot be split
  if (narrow) window_->tabifyDockWidget(tokens, history);
}

void Workspaces::arrangeTeach() {
  // The lesson on the left, the whole height (the session form and the
  // timeline tabbed behind it: at presenter zoom a third of the column is
  // too small for a plot); every panel a page outlines on one stage.
  window_->addDockWidget(Qt::LeftDockWidgetArea, dock(Panel::Lessons));
  window_->addDockWidget(Qt::RightDockWidgetArea, dock(stageOf(Workspace::Teach)));
}

void Workspaces::arrangeCompress() {
  // The session form (prompt, models) and the log on the left; the
  // Compression panel on the stage, the cache views behind it.
  QDockWidget* session = dock(Panel::Session);
  window_->addDockWidget(Qt::LeftDockWidgetArea, session);
  window_->splitDockWidget(session, dock(Panel::Log), Qt::Vertical);
  window_->addDockWidget(Qt::RightDockWidgetArea, dock(Panel::Compression));
}

void Workspaces::arrangeCapture() {
  // The diff's report (verdict, root cause, audit grid) is what a capture is
  // opened for: large, the KV cache under it (the stage the other views are
  // tabbed on), the row history beside both.
  QDockWidget* session = dock(Panel::Session);
  QDockWidget* timeline = dock(Panel::Timeline);
  QDockWidget* diff = dock(Panel::Diff);
  QDockWidget* history = dock(Panel::RowHistory);
  const bool narrow = window_->width() < 1200;
  window_->addDockWidget(Qt::LeftDockWidgetArea, session);
  window_->splitDockWidget(session, timeline, Qt::Vertical);
  window_->addDockWidget(Qt::RightDockWidgetArea, diff);
  window_->splitDockWidget(diff, dock(Panel::Kv), Qt::Vertical);
  if (narrow) {
    window_->tabifyDockWidget(timeline, history);
  } else {
    window_->splitDockWidget(diff, history, Qt::Horizontal);
  }
}

void Workspaces::applyDefaultSizes() {
  // resizeDocks shares out what there is in proportion to the sizes given: give real pixels.
  const int width = window_->width();
  const int tall = std::max(window_->height() - 90, 300);
  const auto share = [](int total, int percent) { return total * percent / 100; };
  switch (current_) {
    case Workspace::Debug: {
      // The arrangement's own shape (made at the size the window had then), not today's width.
      const bool narrow = window_->tabifiedDockWidgets(dock(Panel::RowHistory)).contains(dock(Panel::Tokens));
      const bool compact = window_->tabifiedDockWidgets(dock(Panel::Tokens)).contains(dock(Panel::Timeline));
      const int session = compact ? 280 : 380;
      const int rest = std::max(width - session, 400);
      window_->resizeDocks({dock(Panel::Session), dock(Panel::Kv)}, {session, rest}, Qt::Horizontal);
      if (!narrow) {
        window_->resizeDocks({dock(Panel::Kv), dock(Panel::RowHistory)}, {share(rest, 64), share(rest, 36)}, Qt::Horizontal);
      }
      if (compact) {
        window_->resizeDocks({dock(Panel::Session), dock(Panel::Tokens)}, {share(tall, 62), share(tall, 38)}, Qt::Vertical);
        // The cache gets the larger share: thousands of rows want pixel lines, five verify queries do not;
        // the stage keeps room for the Cache Diff's two plots above its wrapped legend.
        window_->resizeDocks({dock(Panel::Kv), dock(Panel::Attention)}, {share(tall, 53), share(tall, 47)}, Qt::Vertical);
      } else {
        window_->resizeDocks({dock(Panel::Timeline), dock(Panel::Tokens), dock(Panel::Kv), dock(Panel::Attention)},
                             {share(tall, 18), share(tall, 9), share(tall, 43), share(tall, 30)}, Qt::Vertical);
      }
      break;
    }
    case Workspace::Teach:
      // The stage gets 70% of the width: a lesson page's panel is at least half the window.
      window_->resizeDocks({dock(Panel::Lessons), dock(stageOf(Workspace::Teach))}, {share(width, 30), share(width, 70)}, Qt::Horizontal);
      break;
    case Workspace::Compress:
      window_->resizeDocks({dock(Panel::Session), dock(Panel::Compression)}, {share(width, 26), share(width, 74)},
                           Qt::Horizontal);
      window_->resizeDocks({dock(Panel::Session), dock(Panel::Log)}, {share(tall, 72), share(tall, 28)}, Qt::Vertical);
      break;
    case Workspace::Capture: {
      const bool narrow = window_->tabifiedDockWidgets(dock(Panel::RowHistory)).contains(dock(Panel::Timeline));
      const int session = narrow ? share(width, 25) : share(width, 21);
      window_->resizeDocks({dock(Panel::Session), dock(Panel::Diff)}, {session, width - session}, Qt::Horizontal);
      if (!narrow) {
        const int rest = width - session;
        window_->resizeDocks({dock(Panel::Diff), dock(Panel::RowHistory)}, {share(rest, 68), share(rest, 32)}, Qt::Horizontal);
      }
      window_->resizeDocks({dock(Panel::Diff), dock(Panel::Kv)}, {share(tall, 60), share(tall, 40)}, Qt::Vertical);
      window_->resizeDocks({dock(Panel::Session), dock(Panel::Timeline)}, {share(tall, 62), share(tall, 38)}, Qt::Vertical);
      break;
    }
  }
}

}  // namespace kvscope::ui
