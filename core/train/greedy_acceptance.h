#pragma once
// The greedy acceptance rate alpha of a drafter/target pair, as the
// speculative engine measures it: a greedy Session (core/decode/session.h)
// with the drafter, gamma drafts every round (never fewer near the end, so
// every round counts gamma) and the end-of-sequence ignored, run until
// max_new tokens are out. alpha = accepted drafts / drafted tokens.
// The trainer's check of a pair it made.
#include <cstdint>
#include <vector>

#include "core/model/causal_lm.h"

namespace kvscope {

struct AcceptanceStats {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double alpha() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
};

// Rounds run until max_new target tokens are covered; the drafter and the
// target must share a vocabulary. Throws Error if the prompt is empty or
// too long for either context.
AcceptanceStats greedyAcceptance(const CausalLM& target, const CausalLM& drafter, const std::vector<int64_t>& prompt,
                                 int64_t gamma, int64_t max_new);

// The target's greedy continuation (cached forward), max_new tokens.
std::vector<int64_t> greedyContinuation(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t max_new);

}  // namespace kvscope
