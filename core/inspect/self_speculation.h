#pragma once
// Compressed-cache self-speculation (the idea behind MagicDec and TriForce),
// greedy and self-contained: the target drafts for itself over a compressed
// copy of its cache and verifies over the full cache, so the output is
// exactly the target's greedy output; what compression costs shows as alpha,
// the share of drafts accepted.
//
// Bookkeeping as in DESIGN.md: at round start both caches hold every token
// but the last; the draft cache feeds the last token and its own drafts one
// at a time, the full cache verifies [last, d1..d_gamma] in one forward, and
// both are cropped back to the accepted sequence (the draft cache catches up
// on a token it never fed when every draft was accepted).
//
// The compressed cache is compressed once, after the prefill; rows written
// while decoding are kept. Eviction here is a keep mask (KvCache), which
// hides rows without skipping their arithmetic, so the draft forward costs
// what the full one does: no speedup is measured until the cache compacts.
#include <cstdint>
#include <vector>

#include "core/inspect/prefill_compression.h"

namespace kvscope {

struct SelfSpeculationResult {
  std::vector<int64_t> tokens;  // generated after the prompt
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double alpha = 0;  // accepted / drafted
};

// Generates max_new tokens (prompt of at least 2 tokens, gamma >= 1) under
// InferenceMode. `drafter` drafts over its own cache, compressed by spec;
// nullptr: the target itself (self-speculation). With an empty spec and the
// bundled drafter this is plain greedy speculative decoding, the baseline.
// Throws Error for bad arguments or settings.
SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, int64_t gamma, int64_t max_new,
                                         const CausalLM* drafter = nullptr);

}  // namespace kvscope
