#pragma once
// Growing the main window back restores the layout it had at that size
// (a projector at 1024x768 or 1280x720, the window shrunk and grown again):
// the docks' sizes are recorded whenever the layout settles, under the
// window's size, and put back when the window grows to a size it had.
#include <QHash>
#include <QList>
#include <QObject>
#include <QPair>
#include <QSize>
#include <QTimer>

class QDockWidget;
class QMainWindow;

namespace kvscope::ui {

class DockLayoutMemory : public QObject {
  Q_OBJECT
 public:
  DockLayoutMemory(QMainWindow* window, QList<QDockWidget*> docks);
  // Drops every size recorded (another arrangement of the docks took over).
  void forget() { by_size_.clear(); }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  using DockSizes = QList<QPair<QString, QSize>>;  // dock objectName, size
  void record();
  // Gives the docks shown their recorded sizes; true when they already had them.
  bool restore(const DockSizes& sizes);
  // restore() on the next event-loop turns (at most `passes`), while the window keeps the size `to`.
  void restoreSoon(const DockSizes& sizes, const QSize& to, int passes);
  static constexpr int kRestorePasses = 5;
  // The height of the tab bar under a tabbed dock (0: none found).
  int tabBarHeightBelow(QDockWidget* dock) const;

  QMainWindow* window_;
  QList<QDockWidget*> docks_;
  QHash<QString, DockSizes> by_size_;
  QTimer record_;  // coalesces the resizes of one layout pass
};

}  // namespace kvscope::ui
