#pragma once
// kvscope's speed, measured in one run with warm-up and repeated trials
// (medians and spreads): model load time and memory, autoregressive decoding
// with the cache on and off, the time of one decode step as the context
// grows, our forward against a bare libtorch baseline of the same matrix
// products (the one-row pass is the memory-bandwidth bound of a decode step),
// speculative decoding per gamma with its measured alpha and cost ratio c and
// the theoretical speedup beside the measured one, and what tracing costs.
// The report is JSON: the CLI prints it, plots it and tests it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bench/timing.h"
#include "core/model/weight_residency.h"

namespace kvscope {

struct BenchOptions {
  std::string target_dir;
  std::string drafter_dir;      // empty: no speculative section
  std::vector<int64_t> prompt;  // ids of the autoregressive and speculative runs (and, cycled, of long contexts)
  TrialPlan plan;
  int64_t new_tokens = 64;      // generated per autoregressive / speculative run
  std::vector<int64_t> contexts = {64, 128, 256, 512, 1024, 2048};  // past the model's context: skipped
  int64_t uncached_max_context = 2048;  // longer uncached forwards are not timed
  std::vector<int64_t> gammas = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t tracing_gamma = 4;
  double draft_confidence = 0.0;  // the speculative sessions' confidence stop (SessionOptions::draft_confidence)
  int64_t bound_context = 1024;  // the decode step compared with the bandwidth bound (capped by the model's context)
  int64_t prefill_rows = 256;    // rows of the many-row forward compared with the baseline
  WeightResidency weights = WeightResidency::Stored;  // both models' (core/model/weight_residency.h)

  void validate() const;  // throws Error naming the bad option
};

using BenchProgress = std::function<void(const std::string&)>;

// Loads the models itself (load time and peak memory are part of the report).
// Throws Error for unloadable models or bad options.
nlohmann::json runBenchmark(const BenchOptions& options, const BenchProgress& progress = {});

}  // namespace kvscope
