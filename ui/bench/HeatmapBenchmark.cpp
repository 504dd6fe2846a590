#include "ui/bench/HeatmapBenchmark.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QThread>
#include <algorithm>
#include <qcustomplot.h>
#include <vector>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"

namespace kvscope::ui {

QString HeatmapBenchmarkResult::toJson() const {
  QJsonObject object;
  object[QStringLiteral("benchmark")] = QStringLiteral("kv_heatmap_redraw_after_cursor_move");
  object[QStringLiteral("target")] = target;
  object[QStringLiteral("samples")] = samples;
  object[QStringLiteral("rounds")] = rounds;
  object[QStringLiteral("max_rows")] = max_rows;
  object[QStringLiteral("median_ms")] = median_ms;
  object[QStringLiteral("p90_ms")] = p90_ms;
  object[QStringLiteral("max_ms")] = max_ms;
  return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

bool waitForRounds(MainWindow& window, int rounds, int timeout_ms) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeout_ms) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    const SessionSnapshot* snapshot = window.context().snapshot();
    if (snapshot && !window.controller().busy() &&
        (snapshot->lastRound() >= rounds || snapshot->finished || snapshot->replay_only)) {
      return true;
    }
    QThread::msleep(5);
  }
  return false;
}

HeatmapBenchmarkResult benchmarkHeatmapRedraw(MainWindow& window, int passes) {
  HeatmapBenchmarkResult result;
  const SessionSnapshot* snapshot = window.context().snapshot();
  if (!snapshot) return result;
  result.target = QString::fromStdString(snapshot->target_name);
  result.rounds = static_cast<int>(snapshot->lastRound());
  KvCachePanel* panel = window.kvCachePanel();
  std::vector<double> samples;
  for (int pass = 0; pass < passes; ++pass) {
    for (int64_t round = 0; round <= snapshot->lastRound(); ++round) {
      QElapsedTimer timer;
      timer.start();
      window.context().goToRound(round);
      panel->flushRefresh();
      panel->targetView()->plot()->replot(QCustomPlot::rpImmediateRefresh);
      panel->drafterView()->plot()->replot(QCustomPlot::rpImmediateRefresh);
      samples.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
      result.max_rows = std::max(result.max_rows, panel->targetView()->rowCount());
    }
  }
  if (samples.empty()) return result;
  std::sort(samples.begin(), samples.end());
  result.samples = static_cast<int>(samples.size());
  result.median_ms = samples[samples.size() / 2];
  result.p90_ms = samples[std::min(samples.size() - 1, samples.size() * 9 / 10)];
  result.max_ms = samples.back();
  return result;
}

}  // namespace kvscope::ui
