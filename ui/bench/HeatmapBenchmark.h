#pragma once
// Measures what a user waits for after moving the cursor: the KV panel's
// rebuild of both heatmaps plus an immediate replot of the target's, for
// every recorded round, several passes; reports the median. And what a
// user waits for while zooming and panning a big cache: one wheel notch or
// one drag step of the target heatmap, drawn at once.
#include <QString>

namespace kvscope::ui {

class MainWindow;

struct HeatmapBenchmarkResult {
  int samples = 0;
  double median_ms = 0;
  double p90_ms = 0;
  double max_ms = 0;
  double overview_median_ms = 0;  // the target's layer x head summary, computed the event-loop turn after
  int rounds = 0;
  int max_rows = 0;  // most target rows drawn in one heatmap
  int layers = 0;    // the target's
  QString target;
  QString what = QStringLiteral("kv_heatmap_redraw_after_cursor_move");

  QString toJson() const;
};

// Waits (running the event loop) until `rounds` rounds are recorded, the
// session finished, or timeout_ms passed. False on timeout or no session.
bool waitForRounds(MainWindow& window, int rounds, int timeout_ms);
HeatmapBenchmarkResult benchmarkHeatmapRedraw(MainWindow& window, int passes);
// At the cursor's moment: `frames` zoom and pan steps of the target heatmap
// (in to a few rows around the middle, out to everything, panned across),
// each redrawn and replotted immediately.
HeatmapBenchmarkResult benchmarkHeatmapZoom(MainWindow& window, int frames);

}  // namespace kvscope::ui
