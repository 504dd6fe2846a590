#pragma once
// Plain records of what a speculative session did: rounds, cache operations
// and the life of every cache entry. Torch-free so that any consumer (CLI,
// GUI, trace file) can read them.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

// The phases of a session. Prefill runs once (round 0); every later round
// runs Draft -> Verify -> Accept -> Prune.
enum class Phase { Prefill, Draft, Verify, Accept, Prune };
const char* phaseName(Phase phase);

enum class CacheRole { Target, Drafter };
const char* cacheRoleName(CacheRole role);

// Where each token of the sequence came from.
enum class TokenOrigin { Prompt, AcceptedDraft, Correction, Bonus };
const char* tokenOriginName(TokenOrigin origin);

// How the caches are cut back after acceptance (see DESIGN.md).
enum class Bookkeeping {
  Exact,  // target drops gamma - n, drafter gamma - n - 1 (catch-up when n = gamma)
  Seed,   // target drops gamma - n + 1, drafter gamma - n; the missing token is re-fed
};
const char* bookkeepingName(Bookkeeping bookkeeping);
Bookkeeping parseBookkeeping(const std::string& name);  // "exact" | "seed"

// Why a cache entry stopped being valid.
enum class DeathReason {
  Alive,
  RejectedDraft,  // a draft (or a row computed after one) cut at prune
  Refeed,         // a correct entry cut by over-pruning, to be recomputed (seed bookkeeping)
  Eviction,       // removed by an eviction / pruning policy
  Reset,          // the whole cache cleared
};
const char* deathReasonName(DeathReason reason);

// One change of a cache's length.
struct CacheOp {
  CacheRole cache = CacheRole::Target;
  Phase phase = Phase::Prefill;
  enum class Kind { Append, Crop, Clear } kind = Kind::Append;
  int64_t from_length = 0;
  int64_t to_length = 0;
};
const char* cacheOpKindName(CacheOp::Kind kind);

// One entry (one position) of one cache, from its birth to its death.
// Its K/V rows (all layers) are stored once, at birth, in the ledger.
struct LedgerEntry {
  CacheRole cache = CacheRole::Target;
  int64_t position = 0;
  int64_t token = 0;
  int64_t born_round = 0;
  Phase born_phase = Phase::Prefill;
  int64_t died_round = -1;  // -1 while alive
  Phase died_phase = Phase::Prune;
  DeathReason reason = DeathReason::Alive;
  int64_t row = 0;  // index of its K/V rows in the ledger's store

  bool aliveAt(int64_t round) const { return born_round <= round && (died_round < 0 || died_round > round); }
};

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
  std::vector<int64_t> emitted;  // tokens appended to the sequence this round
  std::vector<CacheOp> cache_ops;
  int64_t target_forwards = 0;
  int64_t drafter_forwards = 0;
  double draft_ms = 0, verify_ms = 0, accept_ms = 0, prune_ms = 0;
};

}  // namespace kvscope
