#pragma once
// Plain autoregressive decoding: the baseline every speculative run is
// compared with, using the same sampling settings.
#include <cstdint>
#include <vector>

#include "core/decode/sampling.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  bool use_cache = true;
  bool ignore_eos = false;
  SamplingSettings sampling;
  uint64_t seed = 0;
};

struct GenerateResult {
  std::vector<int64_t> ids;  // generated ids only
  int64_t forward_calls = 0;
  bool stopped_at_eos = false;
};

// Throws Error when the prompt is empty or prompt + max_new_tokens exceeds
// the model's context length.
GenerateResult generateAutoregressive(const CausalLM& model, const std::vector<int64_t>& prompt,
                                      const GenerateOptions& options, const std::vector<int64_t>& eos_ids);

// Shared by every decoder: a clear error before any work when the request
// cannot fit the context.
void checkFitsContext(const CausalLM& model, int64_t prompt_length, int64_t max_new_tokens);
// With a cache: refuses a run whose context would cross a longrope model's
// original_max_position_embeddings. Phi-3 switches to its long factors there,
// which makes every key cached with the short factors stale; kvscope does not
// re-encode the cache at the crossing, so it says so instead of decoding wrong.
void checkCacheStaysValid(const CausalLM& model, int64_t prompt_length, int64_t max_new_tokens);

}  // namespace kvscope
