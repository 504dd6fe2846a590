#pragma once
// Logits of every position of a token sequence, computed in one of the three
// ways the golden fixtures pin down.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/causal_lm.h"

namespace kvscope {

enum class FeedMode {
  NoCache,          // one forward over all ids, no cache
  Cached,           // one token per forward through the cache
  PrefillThenStep,  // ids[:-1] in one forward, then the last id through the cache
};

FeedMode parseFeedMode(const std::string& name);  // "nocache" | "cached" | "prefill_then_step"
const char* feedModeName(FeedMode mode);

// Returns [ids.size(), vocab] logits (float32). Runs under InferenceMode.
at::Tensor sequenceLogits(const CausalLM& model, const std::vector<int64_t>& ids, FeedMode mode);

at::Tensor idsTensor(const std::vector<int64_t>& ids);

// KL(p || q) in nats from log-probabilities over one vocabulary ([vocab],
// float64 for the small values it sums).
double klDivergence(const at::Tensor& log_p, const at::Tensor& log_q);

}  // namespace kvscope
