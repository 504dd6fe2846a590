#pragma once
// The speedup a speculative session shows over plain decoding measured the
// same way (docs/cli.md#run, docs/performance.md): the plain run is the same
// Session with no drafter, so the target steps one token per round with the
// same options, recording (attention, logits, trace budget), eviction, cache
// setting and thread budget. Warm-up pairs first, then trials that alternate
// which of the two runs first; the speedup is the median of the trials'
// tokens/s ratios. A run too short to tell (few new tokens, or trials that
// disagree by more than the effect) says so instead of printing a number.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/decode/drafter.h"
#include "core/decode/session_options.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct SpeedupPlan {
  int warmup = 1;                // untimed pairs first (allocator, thread pool, lazy init)
  int trials = 5;                // timed pairs; at least 2, so the spread can be judged
  int64_t min_new_tokens = 32;   // fewer: the prefill and start-up dominate the timing
};

// One timed pair: the speculative session and the plain one.
struct SpeedupTrial {
  double speculative_ms = 0;
  double plain_ms = 0;
  int64_t speculative_tokens = 0;
  int64_t plain_tokens = 0;
  double speedup = 0;  // (speculative tokens/s) / (plain tokens/s)
};

struct MeasuredSpeedup {
  std::vector<SpeedupTrial> trials;
  int warmup = 0;
  int64_t new_tokens = 0;      // the speculative session's, in the first trial
  int64_t min_new_tokens = 0;  // the plan's threshold
  double median = 0, min = 0, max = 0;           // of the trials' speedups
  double speculative_ms = 0, plain_ms = 0;       // medians
  // Empty when the median can be read as the speedup; otherwise why not.
  std::string too_short_because;
  bool measurable() const { return too_short_because.empty(); }
};

// Times the speculative session (target + drafter) against the same session
// without the drafter, per the plan. Throws Error for a plan of fewer than 2
// trials or a negative warm-up.
MeasuredSpeedup measureSpeedup(const std::shared_ptr<const CausalLM>& target,
                               const std::shared_ptr<const Drafter>& drafter, const std::vector<int64_t>& prompt,
                               const SessionOptions& options, const std::vector<int64_t>& eos_ids,
                               const SpeedupPlan& plan);

// The summary of timed trials (median, range) and the verdict: too short when
// the session made fewer than min_new_tokens, or when the trials' speedups
// range more widely than the median differs from 1 (the noise is larger than
// the effect, so not even its sign is known). Torch-free, so the rule is
// tested on its own.
MeasuredSpeedup summarizeSpeedup(std::vector<SpeedupTrial> trials, int warmup, int64_t new_tokens,
                                 int64_t min_new_tokens);

// The value of the CLI's "measured speedup over autoregressive decoding:" line:
// the median and how it was measured, or "too short to measure (why)".
std::string describeSpeedup(const MeasuredSpeedup& speedup);

nlohmann::json toJson(const MeasuredSpeedup& speedup);

}  // namespace kvscope
