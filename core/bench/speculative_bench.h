#pragma once
// The speculative part of the benchmark: per gamma, sessions against plain
// autoregressive decoding of the same prompt and length (paired trials), the
// measured acceptance rate alpha and cost ratio c, and the theoretical
// speedup (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)) beside the
// measured one; and the cost of tracing (recorded attention and logits).
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bench/timing.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct SpeculativeBenchSetup {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const CausalLM> drafter;  // may be null for tracing (plain target steps)
  std::vector<int64_t> prompt;
  int64_t new_tokens = 64;
  TrialPlan plan;
  // The sessions' confidence stop (SessionOptions::draft_confidence): with
  // it on, a round drafts at most gamma tokens, and the formula's fixed-gamma
  // speedups are left out (null) as they would not describe the run.
  double draft_confidence = 0.0;
};

// One entry per gamma: alpha, c, theoretical and measured speedup (medians,
// spreads), their ratio, the drafts and tokens a round made, and the
// per-forward times behind c.
nlohmann::json benchSpeculative(const SpeculativeBenchSetup& setup, const std::vector<int64_t>& gammas);

// Session time with record_attention and record_logits on vs off (paired
// trials) and the overhead on / off - 1.
nlohmann::json benchTracing(const SpeculativeBenchSetup& setup, int64_t gamma);

}  // namespace kvscope
