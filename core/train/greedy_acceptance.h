#pragma once
// The greedy acceptance rate alpha of a drafter/target pair, measured
// without the speculative engine: greedy speculative decoding emits exactly
// the target's greedy tokens, so each round drafts gamma tokens greedily
// with the drafter from the current sequence, accepts the longest prefix
// that equals the target's greedy continuation, and moves on by that many
// tokens plus one (the target's correction or bonus token).
// alpha = accepted drafts / drafted tokens. A training-time check; the
// speculative engine's own report is the reference.
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
