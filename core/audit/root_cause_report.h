#pragma once
// The root cause's report (core/audit/root_cause.h makes it): the first cache
// operation that broke the contract, or the intended eviction a divergence
// follows. Torch-free and Qt-free, like the audit's report it quotes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/audit/audit_report.h"
#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct RootCause {
  int64_t event_index = 0;  // into record.events.events()
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  Phase phase = Phase::Prefill;
  CacheEventKind operation = CacheEventKind::Append;
  int64_t expected_rows = 0;
  int64_t actual_rows = 0;             // in the first layer that departs
  std::vector<int64_t> layers;         // layers whose result departs
  std::vector<int64_t> rows;           // physical rows breaking the contract (first such layer)
  std::vector<RowVerdict> verdicts;    // those rows, described
  std::string fault_action;            // what the injected fault did to the operation
  std::string what;                    // one sentence for people

  Moment moment() const { return {round, phase}; }
};

// An intended eviction a divergence follows: an eviction policy masked rows
// of the cache before the divergent pass, and no operation broke the
// contract, so the drift is the policy's price, not a cache bug.
struct EvictionCause {
  int64_t event_index = 0;  // the last policy Evict event at or before the divergence
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  Phase phase = Phase::Prefill;
  std::string policy;
  int64_t masked = 0;       // (entry, layer, kv head) rows masked by then, by every such event
  int64_t evictions = 0;    // policy Evict events by then
  std::string what;         // "evicted by policy h2o at round 0 (prefill): ..."

  Moment moment() const { return {round, phase}; }
};

nlohmann::json toJson(const RootCause& cause);
nlohmann::json toJson(const EvictionCause& cause);
// The inverses, for traces; each throws Error naming the problem.
RootCause rootCauseFromJson(const nlohmann::json& j);
EvictionCause evictionCauseFromJson(const nlohmann::json& j);

}  // namespace kvscope
