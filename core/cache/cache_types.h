#pragma once
// The vocabulary of cache operations: which cache, which phase of which
// round, why a row was removed. The lowest layer that needs it is the cache
// (its operation log and fault policy), so it lives here; the trace records
// and everything above reuse it. Torch-free.
#include <cstdint>

namespace kvscope {

// The phases of a session. Prefill runs once (round 0); every later round
// runs Draft -> Verify -> Accept -> Prune.
enum class Phase { Prefill, Draft, Verify, Accept, Prune };
const char* phaseName(Phase phase);

enum class CacheRole { Target, Drafter };
const char* cacheRoleName(CacheRole role);

// Why a cache entry stopped being valid.
enum class DeathReason {
  Alive,
  RejectedDraft,  // a draft (or a row computed after one) cut at prune
  Refeed,         // a correct entry cut by over-pruning, to be recomputed (seed bookkeeping)
  Eviction,       // removed by an eviction / pruning policy
  Reset,          // the whole cache cleared
  Padding,        // a pad row of a padded batch, dropped right after the forward that wrote it
};
const char* deathReasonName(DeathReason reason);

// A moment of a session: just after `phase` of `round` ran (round 0 is the
// prefill). Every recorded view and audit is taken at a moment.
struct Moment {
  int64_t round = 0;
  Phase phase = Phase::Prefill;
};
// Phases in execution order: Prefill < Draft < Verify < Accept < Prune.
int phaseOrder(Phase phase);
// True when a happened at or before b.
bool atOrBefore(const Moment& a, const Moment& b);

}  // namespace kvscope
