#pragma once
// A goodness-of-fit test for tokens drawn from a different distribution at
// every step: the randomized probability integral transform (PIT).
//
// For a token e drawn from a distribution h over the vocabulary (known at that
// step), with the vocabulary in some order fixed before the draw,
//   u = F(e-) + v h(e),   F(e-) = the mass of h before e,  v ~ U[0, 1),
// is exactly uniform on [0, 1). When each token of a sequence follows its own
// h given the tokens before it, the u of all of them are independent uniforms
// (the chain rule), so their histogram can be chi-square tested against the
// uniform one however much h changes from step to step. The order decides
// which mistakes show: a sampler that moves mass between tokens that the order
// puts apart shifts the histogram. A token with h(e) == 0 is counted apart: it
// cannot happen under the hypothesis, and fails the test outright.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chi_square.h"

namespace kvscope::testing_support {

class PitTally {
 public:
  static constexpr int kBins = 10;

  // key[t]: the order of the vocabulary at this step (ascending; ties by id).
  // hypothesis[t]: the distribution e should follow (normalised here).
  void add(int64_t token, const std::vector<double>& hypothesis, const std::vector<double>& key, std::mt19937_64& rng) {
    double total = 0;
    for (double h : hypothesis) total += h;
    if (!(total > 0) || hypothesis.at(static_cast<size_t>(token)) <= 0) {
      ++outside_support_;
      return;
    }
    double before = 0;  // mass of the tokens ordered before `token`
    const double token_key = key[static_cast<size_t>(token)];
    for (size_t t = 0; t < hypothesis.size(); ++t) {
      if (key[t] < token_key || (key[t] == token_key && static_cast<int64_t>(t) < token)) before += hypothesis[t];
    }
    const double v = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const double u = (before + v * hypothesis[static_cast<size_t>(token)]) / total;
    int bin = static_cast<int>(u * kBins);
    bin = bin < 0 ? 0 : (bin >= kBins ? kBins - 1 : bin);
    ++counts_[static_cast<size_t>(bin)];
  }

  int64_t count() const {
    int64_t n = outside_support_;
    for (int64_t c : counts_) n += c;
    return n;
  }
  int64_t outsideSupport() const { return outside_support_; }

  // Chi-square of the u histogram against the uniform one; observations
  // outside the support make it fail (ChiSquareResult::passes).
  ChiSquareResult test() const {
    ChiSquareResult result = chiSquareTest(std::vector<double>(kBins, 1.0 / kBins), counts_);
    result.outside_support = outside_support_;
    return result;
  }

 private:
  std::vector<int64_t> counts_ = std::vector<int64_t>(kBins, 0);
  int64_t outside_support_ = 0;
};

}  // namespace kvscope::testing_support
