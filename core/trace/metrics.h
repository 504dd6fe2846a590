#pragma once
// Summary numbers of a speculative session.
#include <cstdint>
#include <vector>

#include "core/trace/trace_types.h"

namespace kvscope {

struct Metrics {
  int64_t rounds = 0;          // rounds after the prefill
  int64_t generated = 0;       // tokens appended after the prompt
  int64_t drafted = 0;
  int64_t accepted = 0;
  double alpha = 0;            // accepted / drafted
  // Tokens appended per round: accepted drafts plus the correction or bonus token.
  double mean_accepted_length = 0;
  double mean_gamma = 0;
  std::vector<int64_t> drafted_at_position;   // [i]: rounds that drafted a token at draft index i
  std::vector<int64_t> accepted_at_position;  // [i]: rounds that accepted draft i
  std::vector<double> acceptance_at_position;
  int64_t target_forwards = 0;
  int64_t drafter_forwards = 0;
  double target_ms = 0;   // verify + prefill time
  double drafter_ms = 0;  // draft time
  double total_ms = 0;
  // c: the mean time of one drafter forward over one target forward.
  double cost_ratio = 0;
  // (1 - a^(g+1)) / ((1 - a)(g c + 1)) with a = alpha, g = mean gamma, c = cost ratio.
  double theoretical_speedup = 0;
};

Metrics computeMetrics(const std::vector<RoundRecord>& rounds);
// Leviathan et al.'s expected speedup: (1 - a^(g+1)) / ((1 - a)(g c + 1)).
// It prices the verify pass of g + 1 tokens like one target step.
double theoreticalSpeedup(double alpha, double gamma, double cost_ratio);
// The same with the verify pass priced at `verify_cost` target steps:
// (1 - a^(g+1)) / ((1 - a)(g c + verify_cost)). Where the target's weights
// sit in cache (the bundled pair on a CPU) g + 1 rows cost more multiply-adds
// than one, and this is what the measured costs allow.
double speedupWithVerifyCost(double alpha, double gamma, double cost_ratio, double verify_cost);

}  // namespace kvscope
