#pragma once
// The root cause of a cache bug in kvscope's own session or an opened trace:
// the one walker (contract_walk.h) with the session's books as its rules.
// After every event of the log the cache must hold exactly the expected rows,
// each one the token of the round's stream at its own slot, computed for that
// position with that rotary position, stored as computed; with a model, the
// rows an append writes must also equal a from-scratch recomputation
// (kv_tolerance.h). The first event that breaks any of this is the root
// cause; the rows it left wrong are named, like a pixel history.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/cache_audit.h"
#include "core/audit/root_cause_report.h"
#include "core/model/causal_lm.h"
#include "core/trace/session_record.h"

namespace kvscope {

// Display text of a token id (for the sentence); may be empty.
using TokenText = std::function<std::string(int64_t)>;

struct RootCauseOptions {
  const CausalLM* target = nullptr;   // for the value check of appends (optional)
  const CausalLM* drafter = nullptr;
  // Check appended values against a recomputation for events up to this
  // moment (each costs one uncached forward); nullopt: structure only.
  std::optional<Moment> check_values_until;
  AuditTolerance tolerance;
  int64_t sequence = 0;  // the batch row the record is of (named in the root cause)
};

std::optional<RootCause> findRootCause(const SessionRecord& record, const RootCauseOptions& options,
                                       const TokenText& text = {});

// The intended eviction a divergence of `cache` at `moment` follows: the last
// policy Evict event of that cache at or before it (nullopt: none).
std::optional<EvictionCause> evictionBefore(const SessionRecord& record, CacheRole cache, const Moment& moment);

}  // namespace kvscope
