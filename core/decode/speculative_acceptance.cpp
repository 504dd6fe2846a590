#include "core/decode/speculative_acceptance.h"

#include "core/decode/sampling.h"
#include "core/error.h"

namespace kvscope {

AcceptanceResult acceptSampled(const std::vector<int64_t>& drafts, const at::Tensor& q, const at::Tensor& p,
                               at::Generator& generator) {
  AcceptanceResult result;
  const int64_t k = static_cast<int64_t>(drafts.size());
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = drafts[i];
    const double p_d = p[i][d].item<double>();
    const double q_d = q[i][d].item<double>();
    const double u = uniform(generator);
    result.uniforms.push_back(u);
    if (q_d > 0 && u < p_d / q_d) {
      ++result.accepted;
      continue;
    }
    // Rejected: the correction comes from the part of p that q under-covers.
    auto residual = (p[i] - q[i]).clamp_min(0.0);  // [vocab]
    const double mass = residual.sum().item<double>();
    // mass == 0 only when p == q, where a rejection cannot happen except by
    // float rounding; p itself is then the right distribution.
    result.next_token = sampleFrom(mass > 0 ? residual / mass : p[i], generator);
    return result;
  }
  // A round that drafted nothing is a plain target step, not a bonus (as HF counts it).
  result.bonus = k > 0;
  result.next_token = sampleFrom(p[k], generator);
  return result;
}

AcceptanceResult acceptGreedy(const std::vector<int64_t>& drafts, const at::Tensor& p) {
  AcceptanceResult result;
  const int64_t k = static_cast<int64_t>(drafts.size());
  require(p.dim() == 2 && p.size(0) > k, "acceptGreedy: expected " + std::to_string(k + 1) + " target rows for " +
                                             std::to_string(k) + " drafts");
  // The target's choice row by row, up to the first draft it disagrees with.
  int64_t choice = argmaxOfRow(p, 0);
  while (result.accepted < k && drafts[result.accepted] == choice) choice = argmaxOfRow(p, ++result.accepted);
  result.bonus = k > 0 && result.accepted == k;  // no drafts: a plain target step
  result.next_token = choice;
  return result;
}

}  // namespace kvscope
