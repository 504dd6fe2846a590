#pragma once
// Pearson's chi-square goodness-of-fit test for the distribution tests, with
// its own survival function (regularized upper incomplete gamma function
// Q(df/2, x/2), Numerical Recipes style: series below a + 1, Lentz's
// continued fraction above).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope::testing_support {

// P(a, x) by its power series (converges fast for x < a + 1).
inline double lowerGammaSeries(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 100000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
  }
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Q(a, x) by its continued fraction (converges fast for x >= a + 1).
inline double upperGammaContinuedFraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

// Regularized upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a).
inline double regularizedUpperGamma(double a, double x) {
  if (!(a > 0) || x < 0) throw std::invalid_argument("regularizedUpperGamma: need a > 0, x >= 0");
  if (x == 0) return 1.0;
  if (std::isinf(x)) return 0.0;
  if (x < a + 1.0) return 1.0 - lowerGammaSeries(a, x);
  return upperGammaContinuedFraction(a, x);
}

// P(X >= statistic) for X ~ chi-square with df degrees of freedom.
inline double chiSquareSurvival(double statistic, double df) { return regularizedUpperGamma(df / 2.0, statistic / 2.0); }

struct ChiSquareResult {
  double statistic = 0;
  int64_t df = 0;
  double p_value = 0;
  int64_t bins = 0;            // after merging
  int64_t outside_support = 0; // observations of outcomes with expected probability exactly 0
  bool passes(double alpha) const { return outside_support == 0 && df > 0 && p_value > alpha; }
  std::string describe() const {
    char p[32];  // %g: a p-value of 1e-20 reads as such, not as 0.000000
    std::snprintf(p, sizeof p, "%.3g", p_value);
    return "chi2 = " + std::to_string(statistic) + ", df = " + std::to_string(df) + ", p = " + p +
           ", bins = " + std::to_string(bins) + ", observations outside the support = " + std::to_string(outside_support);
  }
};

// probabilities: the hypothesised distribution (sums to ~1); counts: observed
// outcomes, same length. Bins with an expected count below min_expected are
// merged (smallest first) into one bin, which grows until it reaches
// min_expected itself.
inline ChiSquareResult chiSquareTest(const std::vector<double>& probabilities, const std::vector<int64_t>& counts,
                                     double min_expected = 5.0) {
  if (probabilities.size() != counts.size()) throw std::invalid_argument("chiSquareTest: size mismatch");
  const double total_p = std::accumulate(probabilities.begin(), probabilities.end(), 0.0);
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  ChiSquareResult result;
  std::vector<size_t> order(probabilities.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probabilities[a] < probabilities[b]; });
  std::vector<std::pair<double, double>> bins;  // (expected, observed)
  double pooled_expected = 0, pooled_observed = 0;
  bool pooling = true;
  for (size_t i : order) {
    const double expected = n * probabilities[i] / total_p;
    if (probabilities[i] == 0.0) result.outside_support += counts[i];
    if (pooling) {
      // Pool the small bins, and keep pooling until the pool is big enough.
      if (expected < min_expected || (pooled_expected > 0 && pooled_expected < min_expected)) {
        pooled_expected += expected;
        pooled_observed += static_cast<double>(counts[i]);
        continue;
      }
      pooling = false;
    }
    bins.emplace_back(expected, static_cast<double>(counts[i]));
  }
  if (pooled_expected > 0 || pooled_observed > 0) bins.emplace_back(pooled_expected, pooled_observed);
  for (const auto& [expected, observed] : bins) {
    if (expected <= 0) {
      if (observed > 0) result.statistic = std::numeric_limits<double>::infinity();
      continue;
    }
    result.statistic += (observed - expected) * (observed - expected) / expected;
  }
  result.bins = static_cast<int64_t>(bins.size());
  result.df = result.bins - 1;
  result.p_value = result.df > 0 ? chiSquareSurvival(result.statistic, static_cast<double>(result.df)) : 0.0;
  return result;
}

}  // namespace kvscope::testing_support
