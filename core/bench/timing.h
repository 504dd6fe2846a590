#pragma once
// Repeated timing with warm-up, and the process's memory: the measuring
// tools of the benchmark (core/bench/benchmark.h). Torch-free.
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvscope {

struct TrialPlan {
  int warmup = 1;   // untimed runs first (allocator, caches, lazy init)
  int trials = 5;   // timed runs
  // A run that takes longer than this is timed once, without warm-up: the
  // uncached forwards of a 0.5 B model at long contexts take tens of seconds.
  double single_run_budget_ms = 3000;
};

struct Timing {
  std::vector<double> samples_ms;
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  // (max - min) / median: how much the trials disagree.
  double spread() const { return median_ms > 0 ? (max_ms - min_ms) / median_ms : 0; }
};

// Times `run` per the plan. `run` may return early work to undo via `reset`
// (called after every run, untimed), e.g. cropping a cache back.
Timing timeTrials(const std::function<void()>& run, const TrialPlan& plan,
                  const std::function<void()>& reset = {});

Timing timingOf(std::vector<double> samples_ms);
double median(std::vector<double> values);
nlohmann::json toJson(const Timing& timing);

double elapsedMs(const std::function<void()>& run);

// Resident memory of this process now, and its peak so far (getrusage).
double currentRssMb();
double peakRssMb();

}  // namespace kvscope
