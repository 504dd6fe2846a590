#include "ui/bench/Screenshot.h"

#include <QCoreApplication>
#include <QDockWidget>
#include <QImage>
#include <QPixmap>
#include <QThread>

#include "ui/bench/HeatmapBenchmark.h"
#include "ui/windows/MainWindow.h"
#include "ui/windows/ViewerPanel.h"

namespace kvscope::ui {

namespace {
void settle(int ms) {
  for (int i = 0; i < ms / 10; ++i) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    QThread::msleep(10);
  }
}
}  // namespace

bool saveScreenshotWhenReady(MainWindow& window, const QString& path, int rounds, int timeout_ms,
                             const std::function<void()>& arrange, bool palette) {
  if (!waitForRounds(window, rounds, timeout_ms)) return false;
  settle(300);  // queued selections (root cause, requested round) and layout
  for (QDockWidget* dock : window.docks()) {
    if (auto* panel = qobject_cast<ViewerPanel*>(dock->widget())) panel->flushRefresh();
  }
  settle(300);  // queued replots
  if (arrange) {
    arrange();
    settle(300);
  }
  if (!palette) return window.grab().save(path);
  return window.grab().toImage().convertToFormat(QImage::Format_Indexed8, Qt::OrderedDither).save(path);
}

}  // namespace kvscope::ui
