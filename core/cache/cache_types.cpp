#include "core/cache/cache_types.h"

namespace kvscope {

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::Prefill: return "prefill";
    case Phase::Draft: return "draft";
    case Phase::Verify: return "verify";
    case Phase::Accept: return "accept";
    case Phase::Prune: return "prune";
  }
  return "?";
}

const char* cacheRoleName(CacheRole role) { return role == CacheRole::Target ? "target" : "drafter"; }

const char* deathReasonName(DeathReason reason) {
  switch (reason) {
    case DeathReason::Alive: return "alive";
    case DeathReason::RejectedDraft: return "rejected draft";
    case DeathReason::Refeed: return "over-pruned (re-fed)";
    case DeathReason::Eviction: return "eviction";
    case DeathReason::Reset: return "reset";
    case DeathReason::Padding: return "padding";
  }
  return "?";
}

int phaseOrder(Phase phase) { return static_cast<int>(phase); }

bool atOrBefore(const Moment& a, const Moment& b) {
  if (a.round != b.round) return a.round < b.round;
  return phaseOrder(a.phase) <= phaseOrder(b.phase);
}

}  // namespace kvscope
