#pragma once
// The root cause's report (core/audit/contract_walk.h makes it, for a session,
// a trace and a capture alike): the first cache operation that broke the
// contract, or the intended eviction a divergence follows. Torch-free and
// Qt-free, like the audit's report it quotes. One JSON form for `diff`,
// `audit`, traces and `check`.
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
  // What broke, in a word: for a change between forwards the change ("crop",
  // "reset", "evict", and a capture's "slice", "overwrite", "roll",
  // "replace", "none"); for a forward "rows", "window", "values", "store",
  // "padding" (a forward attended a padded batch's pad rows; `rows` names
  // them), and a capture's "tokens", "positions", "refed_prefix",
  // "skipped_position", "unwritten", "empty_slot", "mask", "no_cache", and a
  // hybrid model's recurrent "state" (state_operation, state_kind below).
  std::string kind;
  // The engine's own call the operation belongs to (a capture's target or
  // drafter call; for a change between calls, the next call, the first to
  // see the changed cache); -1 in sessions and traces, whose rounds are kvscope's.
  int64_t call = -1;
  int64_t sequence = 0;  // the batch row whose cache broke (0 for one sequence)
  int64_t expected_rows = 0;
  int64_t actual_rows = 0;             // in the first layer that departs
  std::vector<int64_t> layers;         // layers whose result departs
  std::vector<int64_t> rows;           // physical rows breaking the contract (first such layer)
  std::vector<RowVerdict> verdicts;    // those rows, described
  std::string fault_action;            // what the injected fault did to the operation
  std::string what;                    // one sentence for people
  // A capture's breach of a hybrid model's recurrent state (kind "state"):
  // the operation the engine got wrong ("restore", written in place of
  // `operation`) and the state's kind ("conv" or "ssm"); empty otherwise.
  std::string state_operation;
  std::string state_kind;
  // Kind "block": the pool blocks the paged cache's table maps but its
  // sequence does not own after the operation (rows: the rows they map).
  std::vector<DanglingBlock> dangling_blocks;
  // Kind "overwritten": the sequence that last wrote into this sequence's
  // pool blocks (rows: the rows whose K/V it changed); -1 otherwise.
  int64_t overwritten_by = -1;

  Moment moment() const { return {round, phase}; }
  // A forward's write, or a change between two forwards.
  bool forward() const { return operation == CacheEventKind::Append || operation == CacheEventKind::Refeed; }
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
