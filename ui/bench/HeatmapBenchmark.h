#pragma once
// Measures what a user waits for after moving the cursor: the KV panel's
// rebuild of both heatmaps plus an immediate replot of the target's, for
// every recorded round, several passes; reports the median.
#include <QString>

namespace kvscope::ui {

class MainWindow;

struct HeatmapBenchmarkResult {
  int samples = 0;
  double median_ms = 0;
  double p90_ms = 0;
  double max_ms = 0;
  int rounds = 0;
  int max_rows = 0;  // most target rows drawn in one heatmap
  QString target;

  QString toJson() const;
};

// Waits (running the event loop) until `rounds` rounds are recorded, the
// session finished, or timeout_ms passed. False on timeout or no session.
bool waitForRounds(MainWindow& window, int rounds, int timeout_ms);
HeatmapBenchmarkResult benchmarkHeatmapRedraw(MainWindow& window, int passes);

}  // namespace kvscope::ui
