#pragma once
// Plain records of what a speculative session did: rounds, cache operations
// and the life of every cache entry. Torch-free so that any consumer (CLI,
// GUI, trace file) can read them.
#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/cache_types.h"
#include "core/cache/ledger_entry.h"

namespace kvscope {


// Where each token of the sequence came from.
enum class TokenOrigin { Prompt, AcceptedDraft, Correction, Bonus };
const char* tokenOriginName(TokenOrigin origin);

// How the caches are cut back after acceptance (docs/architecture.md,
// "Speculative rounds, exactly").
enum class Bookkeeping {
  Exact,  // target drops gamma - n, drafter gamma - n - 1 (catch-up when n = gamma)
  Seed,   // target drops gamma - n + 1, drafter gamma - n; the missing token is re-fed
};
const char* bookkeepingName(Bookkeeping bookkeeping);
Bookkeeping parseBookkeeping(const std::string& name);  // "exact" | "seed"



struct RoundRecord {
  int64_t index = 0;         // 1-based; round 0 is the prefill
  int64_t start_length = 0;  // L: tokens in the sequence when the round began
  int64_t gamma = 0;         // drafts requested this round (may be fewer near the end)
  std::vector<int64_t> drafts;
  // Draft probabilities under the processed (sampling) distributions; in
  // greedy mode, under the plain softmax (the processed ones are one-hot).
  std::vector<double> q_draft;  // q_i(d_i)
  std::vector<double> p_draft;  // p_i(d_i)
  std::vector<double> uniforms; // u_i compared with p/q (sampling only)
  int64_t accepted = 0;         // n
  int64_t next_token = -1;      // the correction (n < drafts) or bonus token
  bool bonus = false;
  bool hit_eos = false;
  bool prune_done = false;       // the round has been pruned (it is complete)
  std::vector<int64_t> emitted;  // tokens appended to the sequence this round
  int64_t target_forwards = 0;
  int64_t drafter_forwards = 0;
  double draft_ms = 0, verify_ms = 0, accept_ms = 0, prune_ms = 0;
};

// The tokens whose rows a cache should hold during `round`: the sequence as
// the round began followed by its drafts (the prompt for round 0). Every
// cache's expected rows at any moment of the round are a prefix of it.
std::vector<int64_t> streamOfRound(const std::vector<int64_t>& sequence, int64_t prompt_length,
                                   const std::vector<RoundRecord>& rounds, int64_t round);

}  // namespace kvscope
