#include "core/bench/measured_speedup.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/bench/timing.h"
#include "core/decode/session.h"
#include "core/error.h"

namespace kvscope {
namespace {

struct TimedRun {
  double ms = 0;
  int64_t tokens = 0;
};

// Construction is timed too: a session allocates its caches there, the
// speculative one two of them.
TimedRun timeSession(const std::shared_ptr<const CausalLM>& target, const std::shared_ptr<const Drafter>& drafter,
                     const std::vector<int64_t>& prompt, const SessionOptions& options,
                     const std::vector<int64_t>& eos_ids) {
  TimedRun run;
  run.ms = elapsedMs([&] {
    Session session(target, drafter, prompt, options, eos_ids);
    session.runToEnd();
    run.tokens = static_cast<int64_t>(session.generated().size());
  });
  return run;
}

double tokensPerSecond(int64_t tokens, double ms) { return ms > 0 ? static_cast<double>(tokens) / ms * 1000.0 : 0; }

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string rangeOf(const MeasuredSpeedup& s) { return fixed(s.min, 2) + "-" + fixed(s.max, 2); }

std::vector<double> column(const std::vector<SpeedupTrial>& trials, double SpeedupTrial::*field) {
  std::vector<double> values;
  for (const SpeedupTrial& t : trials) values.push_back(t.*field);
  return values;
}

}  // namespace

MeasuredSpeedup measureSpeedup(const std::shared_ptr<const CausalLM>& target,
                               const std::shared_ptr<const Drafter>& drafter, const std::vector<int64_t>& prompt,
                               const SessionOptions& options, const std::vector<int64_t>& eos_ids,
                               const SpeedupPlan& plan) {
  require(plan.trials >= 2, "the measured speedup needs at least 2 trials, got " + std::to_string(plan.trials));
  require(plan.warmup >= 0, "the measured speedup's warm-up must be 0 or more, got " + std::to_string(plan.warmup));
  require(drafter != nullptr, "the measured speedup needs a drafter: without one both runs are plain decoding");
  const std::shared_ptr<const Drafter> none;
  auto pair = [&](bool speculative_first) {
    SpeedupTrial t;
    TimedRun spec, plain;
    if (speculative_first) {
      spec = timeSession(target, drafter, prompt, options, eos_ids);
      plain = timeSession(target, none, prompt, options, eos_ids);
    } else {
      plain = timeSession(target, none, prompt, options, eos_ids);
      spec = timeSession(target, drafter, prompt, options, eos_ids);
    }
    t.speculative_ms = spec.ms;
    t.plain_ms = plain.ms;
    t.speculative_tokens = spec.tokens;
    t.plain_tokens = plain.tokens;
    const double plain_rate = tokensPerSecond(plain.tokens, plain.ms);
    t.speedup = plain_rate > 0 ? tokensPerSecond(spec.tokens, spec.ms) / plain_rate : 0;
    return t;
  };
  for (int i = 0; i < plan.warmup; ++i) pair(i % 2 == 0);
  // Which run goes first alternates, so a drift in the machine's speed (another
  // process starting, the CPU's clock) falls on both.
  std::vector<SpeedupTrial> trials;
  for (int i = 0; i < plan.trials; ++i) trials.push_back(pair(i % 2 == 0));
  const int64_t new_tokens = trials.front().speculative_tokens;
  return summarizeSpeedup(std::move(trials), plan.warmup, new_tokens, plan.min_new_tokens);
}

MeasuredSpeedup summarizeSpeedup(std::vector<SpeedupTrial> trials, int warmup, int64_t new_tokens,
                                 int64_t min_new_tokens) {
  MeasuredSpeedup s;
  s.trials = std::move(trials);
  s.warmup = warmup;
  s.new_tokens = new_tokens;
  s.min_new_tokens = min_new_tokens;
  if (s.trials.empty()) {
    s.too_short_because = "no trials were timed";
    return s;
  }
  const std::vector<double> speedups = column(s.trials, &SpeedupTrial::speedup);
  s.median = median(speedups);
  s.min = *std::min_element(speedups.begin(), speedups.end());
  s.max = *std::max_element(speedups.begin(), speedups.end());
  s.speculative_ms = median(column(s.trials, &SpeedupTrial::speculative_ms));
  s.plain_ms = median(column(s.trials, &SpeedupTrial::plain_ms));
  const std::string range = rangeOf(s);
  if (new_tokens < min_new_tokens) {
    s.too_short_because = std::to_string(new_tokens) + " new tokens, fewer than the " + std::to_string(min_new_tokens) +
                          " needed; the " + std::to_string(s.trials.size()) + " trials gave " + range;
  } else if (s.trials.size() < 2) {
    s.too_short_because = "one trial: nothing to judge its noise by";
  } else if (s.max - s.min > std::abs(s.median - 1.0)) {
    s.too_short_because = "the " + std::to_string(s.trials.size()) + " trials range over " + range +
                          ", wider than the median " + fixed(s.median, 2) +
                          " differs from 1: the noise is larger than the effect; a longer run (--max-new) may tell";
  }
  return s;
}

std::string describeSpeedup(const MeasuredSpeedup& s) {
  if (!s.measurable()) return "too short to measure (" + s.too_short_because + ")";
  return fixed(s.median, 2) + " (median of " + std::to_string(s.trials.size()) + " trials, " + rangeOf(s) + "; speculative " + fixed(s.speculative_ms, 1) + " ms vs plain " + fixed(s.plain_ms, 1) +
         " ms for " + std::to_string(s.new_tokens) + " tokens, both sessions recording the same way, after " +
         std::to_string(s.warmup) + " warm-up pair" + (s.warmup == 1 ? "" : "s") + ")";
}

nlohmann::json toJson(const MeasuredSpeedup& s) {
  nlohmann::json trials = nlohmann::json::array();
  for (const SpeedupTrial& t : s.trials) {
    trials.push_back({{"speculative_ms", t.speculative_ms},
                      {"plain_ms", t.plain_ms},
                      {"speculative_tokens", t.speculative_tokens},
                      {"plain_tokens", t.plain_tokens},
                      {"speedup", t.speedup}});
  }
  return {{"median", s.median},
          {"min", s.min},
          {"max", s.max},
          {"speculative_ms", s.speculative_ms},
          {"plain_ms", s.plain_ms},
          {"new_tokens", s.new_tokens},
          {"min_new_tokens", s.min_new_tokens},
          {"warmup", s.warmup},
          {"measurable", s.measurable()},
          {"too_short_because", s.measurable() ? nlohmann::json(nullptr) : nlohmann::json(s.too_short_because)},
          {"trials", trials}};
}

}  // namespace kvscope
