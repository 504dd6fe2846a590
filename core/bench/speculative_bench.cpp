#include "core/bench/speculative_bench.h"

#include <algorithm>

#include "core/decode/autoregressive.h"
#include "core/decode/session.h"
#include "core/trace/metrics.h"

namespace kvscope {
namespace {

SessionOptions sessionOptions(const SpeculativeBenchSetup& setup, int64_t gamma, bool trace) {
  SessionOptions o;
  o.gamma = gamma;
  o.draft_confidence = setup.draft_confidence;
  o.max_new_tokens = setup.new_tokens;
  o.ignore_eos = true;  // every run generates the same number of tokens
  o.record_attention = trace;
  o.record_logits = trace;
  return o;
}

std::unique_ptr<Session> runSession(const SpeculativeBenchSetup& setup, int64_t gamma, bool trace) {
  std::shared_ptr<const Drafter> drafter;
  if (setup.drafter) drafter = std::make_shared<ModelDrafter>(setup.drafter, "drafter");
  auto session = std::make_unique<Session>(setup.target, drafter, setup.prompt, sessionOptions(setup, gamma, trace),
                                           std::vector<int64_t>{});
  session->runToEnd();
  return session;
}

double autoregressiveMs(const SpeculativeBenchSetup& setup, int64_t new_tokens) {
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.ignore_eos = true;
  return elapsedMs([&] { generateAutoregressive(*setup.target, setup.prompt, o, {}); });
}

// What one round's forwards cost, from the rounds after the prefill (the
// prefill forward covers the whole prompt and would make the target look slow).
struct ForwardCosts {
  double verify_ms = 0;  // per target (verify) forward of gamma + 1 tokens
  double draft_ms = 0;   // per drafter forward of one token
};

ForwardCosts forwardCosts(const Session& session) {
  double verify = 0, draft = 0;
  int64_t verifies = 0, drafts = 0;
  for (const RoundRecord& r : session.rounds()) {
    if (r.index == 0) continue;
    verify += r.verify_ms;
    draft += r.draft_ms;
    verifies += r.target_forwards;
    drafts += r.drafter_forwards;
  }
  return {verifies ? verify / static_cast<double>(verifies) : 0, drafts ? draft / static_cast<double>(drafts) : 0};
}

struct GammaTrial {
  double alpha = 0, cost_ratio = 0, theoretical = 0, verify_priced = 0, measured = 0, verify_ms = 0, draft_ms = 0,
         session_ms = 0, baseline_ms = 0, target_step_ms = 0, verify_over_step = 0, mean_accepted_length = 0,
         drafts_per_round = 0;
};

GammaTrial gammaTrial(const SpeculativeBenchSetup& setup, int64_t gamma) {
  GammaTrial t;
  t.baseline_ms = autoregressiveMs(setup, setup.new_tokens);
  // One target decode step: the baseline without its prefill and first token.
  const double prefill_ms = autoregressiveMs(setup, 1);
  t.target_step_ms = (t.baseline_ms - prefill_ms) / static_cast<double>(std::max<int64_t>(1, setup.new_tokens - 1));
  std::unique_ptr<Session> session;
  t.session_ms = elapsedMs([&] { session = runSession(setup, gamma, /*trace=*/false); });
  const Metrics m = session->metrics();
  const ForwardCosts costs = forwardCosts(*session);
  t.alpha = m.alpha;
  // Leviathan et al.'s c: one drafter run over one target run, a token each.
  // The formula then prices verification like one target step; what it
  // really costs is reported beside it (verify_over_step).
  t.cost_ratio = t.target_step_ms > 0 ? costs.draft_ms / t.target_step_ms : 0;
  t.verify_over_step = t.target_step_ms > 0 ? costs.verify_ms / t.target_step_ms : 0;
  t.verify_ms = costs.verify_ms;
  t.draft_ms = costs.draft_ms;
  t.mean_accepted_length = m.mean_accepted_length;
  t.drafts_per_round = m.mean_gamma;  // gamma unless a confidence stop or the end cut rounds short
  t.theoretical = theoreticalSpeedup(m.alpha, static_cast<double>(gamma), t.cost_ratio);
  t.verify_priced = speedupWithVerifyCost(m.alpha, static_cast<double>(gamma), t.cost_ratio, t.verify_over_step);
  t.measured = t.baseline_ms / t.session_ms;
  return t;
}

std::vector<double> column(const std::vector<GammaTrial>& trials, double GammaTrial::*field) {
  std::vector<double> values;
  for (const GammaTrial& t : trials) values.push_back(t.*field);
  return values;
}

nlohmann::json summary(const std::vector<GammaTrial>& trials, double GammaTrial::*field) {
  const Timing s = timingOf(column(trials, field));  // not only times: the same median / min / max
  return {{"median", s.median_ms}, {"min", s.min_ms}, {"max", s.max_ms}};
}

nlohmann::json gammaEntry(const SpeculativeBenchSetup& setup, int64_t gamma) {
  for (int i = 0; i < setup.plan.warmup; ++i) gammaTrial(setup, gamma);
  std::vector<GammaTrial> trials;
  for (int i = 0; i < std::max(1, setup.plan.trials); ++i) trials.push_back(gammaTrial(setup, gamma));
  std::vector<double> efficiency, of_priced;
  for (const GammaTrial& t : trials) {
    efficiency.push_back(t.measured / t.theoretical);
    of_priced.push_back(t.measured / t.verify_priced);
  }
  const double alpha = median(column(trials, &GammaTrial::alpha));
  const double c = median(column(trials, &GammaTrial::cost_ratio));
  const double verify_cost = median(column(trials, &GammaTrial::verify_over_step));
  // The formula assumes gamma drafts in every round; a confidence stop drafts
  // fewer, and its alpha counts only the drafts it dared.
  const bool fixed_gamma = setup.draft_confidence <= 0;
  const auto ifFixed = [fixed_gamma](double value) { return fixed_gamma ? nlohmann::json(value) : nlohmann::json(); };
  return {{"gamma", gamma},
          {"draft_confidence", setup.draft_confidence},
          {"trials", trials.size()},
          {"alpha", alpha},
          {"cost_ratio", c},
          // From the medians of alpha and c, so it can be checked against them.
          {"theoretical_speedup", ifFixed(theoreticalSpeedup(alpha, static_cast<double>(gamma), c))},
          {"measured_speedup", summary(trials, &GammaTrial::measured)},
          {"measured_over_theoretical", ifFixed(median(efficiency))},
          // The formula with the verify pass at its measured cost. c and the
          // verify cost are timed per phase, the session's bookkeeping inside
          // them; what is left between this and the measured speedup falls
          // between the phases: the prefills, acceptance and rollback.
          {"verify_priced_speedup", ifFixed(speedupWithVerifyCost(alpha, static_cast<double>(gamma), c, verify_cost))},
          {"measured_over_verify_priced", ifFixed(median(of_priced))},
          {"drafts_per_round", summary(trials, &GammaTrial::drafts_per_round)},
          {"mean_accepted_length", summary(trials, &GammaTrial::mean_accepted_length)},
          {"verify_forward_ms", summary(trials, &GammaTrial::verify_ms)},
          {"target_step_ms", summary(trials, &GammaTrial::target_step_ms)},
          {"verify_over_step", verify_cost},
          {"drafter_forward_ms", summary(trials, &GammaTrial::draft_ms)},
          {"session_ms", summary(trials, &GammaTrial::session_ms)},
          {"autoregressive_ms", summary(trials, &GammaTrial::baseline_ms)}};
}

}  // namespace

nlohmann::json benchSpeculative(const SpeculativeBenchSetup& setup, const std::vector<int64_t>& gammas) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t gamma : gammas) out.push_back(gammaEntry(setup, gamma));
  return out;
}

nlohmann::json benchTracing(const SpeculativeBenchSetup& setup, int64_t gamma) {
  std::vector<double> on, off;
  auto pair = [&](bool keep) {
    const double off_ms = elapsedMs([&] { runSession(setup, gamma, false); });
    const double on_ms = elapsedMs([&] { runSession(setup, gamma, true); });
    if (keep) {
      off.push_back(off_ms);
      on.push_back(on_ms);
    }
  };
  for (int i = 0; i < setup.plan.warmup; ++i) pair(false);
  for (int i = 0; i < std::max(1, setup.plan.trials); ++i) pair(true);
  const Timing t_on = timingOf(on), t_off = timingOf(off);
  return {{"gamma", setup.drafter ? gamma : 0},
          {"drafter", setup.drafter != nullptr},
          {"new_tokens", setup.new_tokens},
          {"tracing_off", toJson(t_off)},
          {"tracing_on", toJson(t_on)},
          {"overhead", t_off.median_ms > 0 ? t_on.median_ms / t_off.median_ms - 1.0 : 0.0}};
}

}  // namespace kvscope
