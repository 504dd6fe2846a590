#include "ui/bench/HeatmapBenchmark.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QThread>
#include <algorithm>
#include <qcustomplot.h>
#include <vector>

#include "ui/context/LayerSummary.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"

namespace kvscope::ui {

QString HeatmapBenchmarkResult::toJson() const {
  QJsonObject object;
  object[QStringLiteral("benchmark")] = what;
  object[QStringLiteral("layers")] = layers;
  object[QStringLiteral("target")] = target;
  object[QStringLiteral("samples")] = samples;
  object[QStringLiteral("rounds")] = rounds;
  object[QStringLiteral("max_rows")] = max_rows;
  object[QStringLiteral("median_ms")] = median_ms;
  object[QStringLiteral("p90_ms")] = p90_ms;
  object[QStringLiteral("max_ms")] = max_ms;
  if (overview_median_ms > 0) object[QStringLiteral("overview_median_ms")] = overview_median_ms;
  return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

bool waitForRounds(MainWindow& window, int rounds, int timeout_ms) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeout_ms) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    if (window.startupScript().stopped()) return false;  // a step failed: nothing more will come
    const SessionSnapshot* snapshot = window.context().snapshot();
    if (snapshot && !window.controller().busy() &&
        (snapshot->lastRound() >= rounds || snapshot->finished || snapshot->replay_only)) {
      return true;
    }
    QThread::msleep(5);
  }
  return false;
}

namespace {

HeatmapBenchmarkResult describeSession(const SessionSnapshot& snapshot) {
  HeatmapBenchmarkResult result;
  result.target = QString::fromStdString(snapshot.target_name);
  result.rounds = static_cast<int>(snapshot.lastRound());
  result.layers = static_cast<int>(snapshot.target.layers);
  return result;
}

void summarize(std::vector<double> samples, HeatmapBenchmarkResult& result) {
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  result.samples = static_cast<int>(samples.size());
  result.median_ms = samples[samples.size() / 2];
  result.p90_ms = samples[std::min(samples.size() - 1, samples.size() * 9 / 10)];
  result.max_ms = samples.back();
}

}  // namespace

HeatmapBenchmarkResult benchmarkHeatmapRedraw(MainWindow& window, int passes) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  if (!snapshot) return {};
  HeatmapBenchmarkResult result = describeSession(*snapshot);
  KvCachePanel* panel = window.kvCachePanel();
  std::vector<double> samples, overview;
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
      // Then the target's layer x head overview, computed on the next event-loop turn.
      QElapsedTimer later;
      later.start();
      layerSummary(*snapshot, CacheRole::Target, window.context().cursor().moment(), panel->showingValues());
      overview.push_back(static_cast<double>(later.nsecsElapsed()) / 1e6);
    }
  }
  summarize(std::move(samples), result);
  if (!overview.empty()) {
    std::sort(overview.begin(), overview.end());
    result.overview_median_ms = overview[overview.size() / 2];
  }
  return result;
}

HeatmapBenchmarkResult benchmarkHeatmapZoom(MainWindow& window, int frames) {
  const SessionSnapshot* snapshot = window.context().snapshot();
  if (!snapshot) return {};
  HeatmapBenchmarkResult result = describeSession(*snapshot);
  result.what = QStringLiteral("kv_heatmap_zoom_and_pan_frame");
  KvHeatmapView* view = window.kvCachePanel()->targetView();
  window.kvCachePanel()->flushRefresh();
  view->fit();
  result.max_rows = view->rowCount();
  const double middle = view->rowCount() / 2.0;
  std::vector<double> samples;
  for (int frame = 0; frame < frames; ++frame) {
    QElapsedTimer timer;
    timer.start();
    // Twelve notches in, a few pans, twelve notches out: every bin size from
    // all rows per line to a handful of labelled rows.
    const int step = frame % 30;
    if (step < 12) view->zoomRows(0.8, middle);
    else if (step < 18) view->panRows(step < 15 ? 3.0 : -3.0);
    else view->zoomRows(1.25, middle);
    view->plot()->replot(QCustomPlot::rpImmediateRefresh);
    samples.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
  }
  view->fit();
  summarize(std::move(samples), result);
  return result;
}

}  // namespace kvscope::ui
