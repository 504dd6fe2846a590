#include "core/bench/timing.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

namespace kvscope {

double elapsedMs(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

Timing timingOf(std::vector<double> samples_ms) {
  Timing t;
  t.samples_ms = std::move(samples_ms);
  if (t.samples_ms.empty()) return t;
  t.median_ms = median(t.samples_ms);
  t.min_ms = *std::min_element(t.samples_ms.begin(), t.samples_ms.end());
  t.max_ms = *std::max_element(t.samples_ms.begin(), t.samples_ms.end());
  return t;
}

Timing timeTrials(const std::function<void()>& run, const TrialPlan& plan, const std::function<void()>& reset) {
  auto timed = [&] {
    const double ms = elapsedMs(run);
    if (reset) reset();
    return ms;
  };
  std::vector<double> samples;
  for (int i = 0; i < plan.warmup; ++i) {
    const double ms = timed();
    if (ms > plan.single_run_budget_ms) return timingOf({ms});  // too slow to repeat: this run is the trial
  }
  for (int i = 0; i < std::max(1, plan.trials); ++i) {
    samples.push_back(timed());
    if (plan.warmup == 0 && samples.front() > plan.single_run_budget_ms) break;
  }
  return timingOf(samples);
}

nlohmann::json toJson(const Timing& timing) {
  return {{"median_ms", timing.median_ms},
          {"min_ms", timing.min_ms},
          {"max_ms", timing.max_ms},
          {"spread", timing.spread()},
          {"trials", timing.samples_ms.size()}};
}

double currentRssMb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peakRssMb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

}  // namespace kvscope
