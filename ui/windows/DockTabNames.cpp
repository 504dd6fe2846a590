#include "ui/windows/DockTabNames.h"

#include <QChildEvent>
#include <QMainWindow>
#include <QTabBar>

namespace kvscope::ui {

DockTabNames::DockTabNames(QMainWindow* window) : QObject(window) {
  for (QTabBar* bar : window->findChildren<QTabBar*>(QString(), Qt::FindDirectChildrenOnly)) keepNames(bar);
  window->installEventFilter(this);
}

bool DockTabNames::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::ChildAdded || event->type() == QEvent::ChildPolished) {
    if (auto* bar = qobject_cast<QTabBar*>(static_cast<QChildEvent*>(event)->child())) keepNames(bar);
  }
  return QObject::eventFilter(watched, event);
}

void DockTabNames::keepNames(QTabBar* bar) {
  bar->setElideMode(Qt::ElideNone);
  bar->setUsesScrollButtons(true);
}

}  // namespace kvscope::ui
