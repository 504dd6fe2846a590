#pragma once
// Tabbed docks keep their whole names. Qt's dock tab bars elide by default,
// and at 1024x768 or under presenter zoom "Lessons" became "Les..." and
// "Session" "Se...": a teacher cannot point at a tab nobody can read. Every
// tab bar the main window makes (it makes them as docks are tabified) shows
// full names and scroll arrows when they do not fit.
#include <QObject>

class QMainWindow;
class QTabBar;

namespace kvscope::ui {

class DockTabNames : public QObject {
  Q_OBJECT
 public:
  explicit DockTabNames(QMainWindow* window);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  static void keepNames(QTabBar* bar);
};

}  // namespace kvscope::ui
