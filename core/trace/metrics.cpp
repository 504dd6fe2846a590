#include "core/trace/metrics.h"

#include <cmath>

namespace kvscope {

double theoreticalSpeedup(double alpha, double gamma, double cost_ratio) {
  return speedupWithVerifyCost(alpha, gamma, cost_ratio, 1.0);
}

double speedupWithVerifyCost(double alpha, double gamma, double cost_ratio, double verify_cost) {
  const double round_cost = gamma * cost_ratio + verify_cost;  // in target steps
  if (alpha >= 1.0) return (gamma + 1.0) / round_cost;        // limit of the geometric sum
  return (1.0 - std::pow(alpha, gamma + 1.0)) / ((1.0 - alpha) * round_cost);
}

Metrics computeMetrics(const std::vector<RoundRecord>& rounds) {
  Metrics m;
  double gamma_sum = 0;
  for (const RoundRecord& r : rounds) {
    m.target_forwards += r.target_forwards;
    m.drafter_forwards += r.drafter_forwards;
    m.target_ms += r.verify_ms;
    m.drafter_ms += r.draft_ms;
    m.total_ms += r.draft_ms + r.verify_ms + r.accept_ms + r.prune_ms;
    if (r.index == 0) continue;  // the prefill is not a round
    ++m.rounds;
    m.generated += static_cast<int64_t>(r.emitted.size());
    const int64_t drafted = static_cast<int64_t>(r.drafts.size());
    m.drafted += drafted;
    m.accepted += r.accepted;
    gamma_sum += static_cast<double>(drafted);
    if (static_cast<int64_t>(m.drafted_at_position.size()) < drafted) {
      m.drafted_at_position.resize(drafted, 0);
      m.accepted_at_position.resize(drafted, 0);
    }
    for (int64_t i = 0; i < drafted; ++i) {
      ++m.drafted_at_position[i];
      if (i < r.accepted) ++m.accepted_at_position[i];
    }
  }
  m.alpha = m.drafted ? static_cast<double>(m.accepted) / static_cast<double>(m.drafted) : 0.0;
  m.mean_accepted_length = m.rounds ? static_cast<double>(m.generated) / static_cast<double>(m.rounds) : 0.0;
  m.mean_gamma = m.rounds ? gamma_sum / static_cast<double>(m.rounds) : 0.0;
  for (size_t i = 0; i < m.drafted_at_position.size(); ++i) {
    m.acceptance_at_position.push_back(static_cast<double>(m.accepted_at_position[i]) /
                                       static_cast<double>(m.drafted_at_position[i]));
  }
  const double per_target = m.target_forwards ? m.target_ms / static_cast<double>(m.target_forwards) : 0.0;
  const double per_drafter = m.drafter_forwards ? m.drafter_ms / static_cast<double>(m.drafter_forwards) : 0.0;
  m.cost_ratio = per_target > 0 ? per_drafter / per_target : 0.0;
  m.theoretical_speedup = m.drafted ? theoreticalSpeedup(m.alpha, m.mean_gamma, m.cost_ratio) : 1.0;
  return m;
}

}  // namespace kvscope
