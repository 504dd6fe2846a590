#include "core/trace/trace_types.h"

#include "core/error.h"

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

const char* tokenOriginName(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Prompt: return "prompt";
    case TokenOrigin::AcceptedDraft: return "accepted";
    case TokenOrigin::Correction: return "correction";
    case TokenOrigin::Bonus: return "bonus";
  }
  return "?";
}

const char* bookkeepingName(Bookkeeping bookkeeping) {
  return bookkeeping == Bookkeeping::Exact ? "exact" : "seed";
}

Bookkeeping parseBookkeeping(const std::string& name) {
  if (name == "exact") return Bookkeeping::Exact;
  if (name == "seed") return Bookkeeping::Seed;
  throw Error("unknown bookkeeping '" + name + "' (expected exact or seed)");
}

const char* deathReasonName(DeathReason reason) {
  switch (reason) {
    case DeathReason::Alive: return "alive";
    case DeathReason::RejectedDraft: return "rejected draft";
    case DeathReason::Refeed: return "over-pruned (re-fed)";
    case DeathReason::Eviction: return "eviction";
    case DeathReason::Reset: return "reset";
  }
  return "?";
}

const char* cacheOpKindName(CacheOp::Kind kind) {
  switch (kind) {
    case CacheOp::Kind::Append: return "append";
    case CacheOp::Kind::Crop: return "crop";
    case CacheOp::Kind::Clear: return "clear";
  }
  return "?";
}

}  // namespace kvscope
