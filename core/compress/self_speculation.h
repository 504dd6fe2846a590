#pragma once
// Compressed-cache self-speculation (the idea behind MagicDec and TriForce),
// greedy: the target drafts for itself over a compressed copy of its cache
// and verifies over the full cache, so the output is exactly the target's
// greedy output; what compression costs shows as alpha, the share of drafts
// accepted, and what it saves as the draft's time.
//
// It is a greedy Session (core/decode/session.h) whose drafter is the target
// over the compressed copy (core/compress/self_speculation_drafter.h): the
// session's loop drafts, verifies, accepts and prunes, and every operation on
// both caches is logged by their tracked caches. Bookkeeping as in docs/architecture.md.
//
// The drafting cache is compressed once, after the prefill; rows written
// while decoding are kept. By default it then compacts (KvCache::compact):
// it holds only the kept rows, so a draft step's attention reads budget rows
// instead of the whole prefix. The draft still runs the target's weights,
// which cost the same at any budget: the saving is attention's share only.
#include <cstdint>
#include <vector>

#include "core/compress/draft_cache.h"
#include "core/compress/draft_cache_comparison.h"
#include "core/compress/prefill_compression.h"
#include "core/decode/session_options.h"

namespace kvscope {

struct SelfSpeculationOptions {
  int64_t gamma = SessionOptions{}.gamma;  // the session's defaults (core/decode/session_options.h)
  int64_t max_new = SessionOptions{}.max_new_tokens;
  DraftCacheLayout layout = DraftCacheLayout::Compacted;
  std::vector<int64_t> eos_ids;  // stop after the first of these is emitted; empty: always max_new tokens
  // Keep each round's drafts and outcome and, at the end, both caches side
  // by side (SelfSpeculationResult::rounds_log, ::caches): what the GUI shows.
  bool record = false;
};

// One round as it happened (SelfSpeculationOptions::record).
struct SelfSpeculationRound {
  int64_t first_position = 0;   // the sequence position of the first draft
  std::vector<int64_t> drafts;  // what the compressed cache proposed
  int64_t accepted = 0;         // how many of them the full cache's verify accepted
  int64_t target_token = 0;     // the target's token after the accepted drafts (correction or bonus)
};

struct SelfSpeculationResult {
  std::vector<int64_t> tokens;  // generated after the prompt
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double alpha = 0;               // accepted / drafted
  int64_t draft_rows = 0;         // rows layer 0 of the drafting cache held after the compression (kv head 0)
  int64_t full_rows = 0;          // rows the full cache held then (the prefill)
  double draft_seconds = 0;       // time in draft forwards (catch-up included)
  double verify_seconds = 0;      // time in verify forwards (the prefills not included)
  bool stopped_at_eos = false;
  std::vector<SelfSpeculationRound> rounds_log;  // with options.record
  DraftCacheComparison caches;                   // with options.record: both caches after the last round
};

// Generates options.max_new tokens (prompt of at least 2 tokens, gamma >= 1)
// under InferenceMode. `drafter` drafts over its own cache, compressed by
// spec; nullptr: the target itself (self-speculation). With an empty spec
// and the bundled drafter this is plain greedy speculative decoding, the
// baseline. Throws Error for bad arguments or settings (a re-rotated layout
// on a model without rotary keys, a compression a compacted cache cannot hold).
SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, const SelfSpeculationOptions& options,
                                         const CausalLM* drafter = nullptr);

// The same with a compacted drafting cache and no EOS (the sweeps and tests).
SelfSpeculationResult runSelfSpeculation(const CausalLM& target, const std::vector<int64_t>& prompt,
                                         const CompressionSpec& spec, int64_t gamma, int64_t max_new,
                                         const CausalLM* drafter = nullptr);

}  // namespace kvscope
