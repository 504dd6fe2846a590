#include "ui/windows/DockLayoutMemory.h"

#include <QDockWidget>
#include <QEvent>
#include <QMainWindow>
#include <QResizeEvent>
#include <QTabBar>
#include <cstdlib>

namespace kvscope::ui {

namespace {
QString sizeKey(const QSize& size) { return QStringLiteral("%1x%2").arg(size.width()).arg(size.height()); }
}  // namespace

DockLayoutMemory::DockLayoutMemory(QMainWindow* window, QList<QDockWidget*> docks)
    : QObject(window), window_(window), docks_(std::move(docks)) {
  record_.setSingleShot(true);
  record_.setInterval(0);
  connect(&record_, &QTimer::timeout, this, &DockLayoutMemory::record);
  window_->installEventFilter(this);
  for (QDockWidget* dock : docks_) dock->installEventFilter(this);
}

void DockLayoutMemory::record() {
  DockSizes sizes;
  for (QDockWidget* dock : docks_) sizes << qMakePair(dock->objectName(), dock->size());
  by_size_[sizeKey(window_->size())] = sizes;
}

bool DockLayoutMemory::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() != QEvent::Resize || !window_->isVisible()) return false;
  // Any size change (the window, or a dock splitter dragged): once the layout
  // settles, its dock sizes are what this window size looks like.
  record_.start();
  if (watched != window_) return false;
  const auto* resize = static_cast<QResizeEvent*>(event);
  const QSize from = resize->oldSize();
  const QSize to = resize->size();
  const bool grew = from.isValid() && (to.width() > from.width() || to.height() > from.height());
  if (!grew || !by_size_.contains(sizeKey(to))) return false;
  restoreSoon(by_size_.value(sizeKey(to)), to, kRestorePasses);
  return false;
}

void DockLayoutMemory::restoreSoon(const DockSizes& sizes, const QSize& to, int passes) {
  // Once the layout has taken the new size, then again until every dock has
  // its size: one pass's widths change what some panels need in height, so a
  // single pass can land a few pixels off (more so on a busy machine, where
  // the panels' refreshes interleave differently with the layout's).
  QTimer::singleShot(0, this, [this, sizes, to, passes] {
    if (window_->size() != to) return;  // resized again meanwhile: that size's own memory applies
    if (!restore(sizes) && passes > 1) restoreSoon(sizes, to, passes - 1);
  });
}

int DockLayoutMemory::tabBarHeightBelow(QDockWidget* dock) const {
  const QRect area(dock->mapTo(window_, QPoint()), dock->size());
  for (QTabBar* bar : window_->findChildren<QTabBar*>(QString(), Qt::FindDirectChildrenOnly)) {
    const QRect at(bar->mapTo(window_, QPoint()), bar->size());
    if (bar->isVisible() && std::abs(at.top() - area.bottom()) <= 6 && at.left() < area.right() && at.right() > area.left()) {
      return bar->height();
    }
  }
  return 0;
}

bool DockLayoutMemory::restore(const DockSizes& sizes) {
  // resizeDocks shares out each direction among the docks given: the ones in
  // front of their tab group (a tab behind another is moved out of the window).
  QList<QDockWidget*> shown;
  QList<int> widths, heights;
  bool reached = true;  // every dock already has its size (within a pixel)
  for (const auto& [name, size] : sizes) {
    auto* dock = window_->findChild<QDockWidget*>(name);
    if (!dock || dock->isHidden() || dock->isFloating() ||
        !window_->rect().contains(QRect(dock->mapTo(window_, QPoint()), dock->size()))) {
      continue;
    }
    shown << dock;
    widths << size.width();
    // A tab group's size includes its tab bar (below it): resizeDocks sizes the group.
    heights << size.height() + (window_->tabifiedDockWidgets(dock).isEmpty() ? 0 : tabBarHeightBelow(dock));
    reached = reached && std::abs(dock->width() - size.width()) <= 1 && std::abs(dock->height() - size.height()) <= 1;
  }
  if (reached) return true;
  window_->resizeDocks(shown, widths, Qt::Horizontal);
  window_->resizeDocks(shown, heights, Qt::Vertical);
  return false;
}

}  // namespace kvscope::ui
