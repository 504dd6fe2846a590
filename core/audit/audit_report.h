#pragma once
// The report types of the inspection tools, shared as they are by the core,
// the CLI (as JSON) and the GUI (in snapshots): the row audit, the root cause
// and the cached-vs-uncached diff. Torch-free and Qt-free.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// --- the row audit (core/audit/cache_audit.h) ------------------------------
enum class RowState { Ok, Stale, Missing, Duplicate, WrongPosition, WrongValues };
const char* rowStateName(RowState state);  // "ok", "stale", "missing", "duplicate", "wrong_position", "wrong_values"

struct AuditTolerance {
  // A row is wrong when |cached - fresh| > absolute + relative * max|fresh row| (per head).
  double absolute = 1e-4;
  double relative = 1e-3;  // fp16 storage rounds by <= 4.9e-4 relative: inside
};

struct RowVerdict {
  CacheRole cache = CacheRole::Target;
  int64_t layer = 0;
  int64_t row = 0;      // the physical row; for a missing one, the row it belongs in
  int64_t entry = -1;   // ledger entry held (-1: missing)
  int64_t token = 0;
  int64_t position = 0;       // written for
  int64_t rope_position = 0;  // rotary position applied
  RowState state = RowState::Ok;
  std::optional<double> max_abs_dk;  // vs the recomputation of `position` (when comparable)
  std::optional<double> max_abs_dv;
  int64_t worst_head = 0;
};

struct CacheAudit {
  CacheRole cache = CacheRole::Target;
  Moment moment;
  int64_t expected_rows = 0;               // positions [0, expected_rows) of the stream...
  std::vector<int64_t> expected_first;     // ...from this position on, per layer (sliding windows; empty: 0)
  std::vector<int64_t> rows_per_layer;
  bool values_checked = false;  // false without a model: identities only
  std::vector<RowVerdict> rows; // the rows that are not ok, by row then layer
  int64_t ok_rows = 0;          // (layer, row) pairs that are ok
  double max_value_error = 0;   // over rows comparable with the recomputation
  // (layer, row) pairs whose values were not compared: written after an
  // eviction policy masked rows, their K/V in layers > 0 come from attention
  // over the compressed cache, and a full-cache recomputation is not their
  // reference (layer 0's depend on the token and position only: compared).
  int64_t not_comparable_after_eviction = 0;
  // [layer][row]: max(|dK|, |dV|) of each physical row (+inf: identity
  // broken, NaN: values not checked).
  std::vector<std::vector<double>> error;

  bool clean() const { return rows.empty(); }
  const RowVerdict* firstBad() const { return rows.empty() ? nullptr : &rows.front(); }
};

// --- the root cause (core/audit/root_cause.h) --------------------------------
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

// --- the diff (core/audit/cache_diff.h) ----------------------------------------
enum class PositionClass { Agree, Noise, Divergent };
const char* positionClassName(PositionClass c);

struct DiffTolerances {
  double agree = 1e-4;  // max |delta logit| for "agree" (the fp32 cached-vs-uncached level)
  double noise = 0.05;  // above this a difference is a divergence even if top-1 holds
};

struct PositionDiff {
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  int64_t position = 0;  // absolute position of the query whose next-token logits these are
  double max_abs_logit_diff = 0;
  double kl = 0;              // KL(p_uncached || p_cached), softmax at temperature 1
  bool top1_agree = true;
  int64_t top1_cached = 0;
  int64_t top1_uncached = 0;
  double top2_margin = 0;     // uncached top-1 minus top-2 logit
  PositionClass verdict = PositionClass::Agree;
};

struct FirstDivergence {
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  Phase phase = Phase::Verify;   // the pass whose logits diverged (draft or verify)
  int64_t position = 0;
  std::optional<int64_t> layer;  // the first bad row of the audit at that moment
  std::optional<int64_t> head;   // its worst kv head
  std::optional<int64_t> row;    // the physical row
};

struct DiffReport {
  std::string mode;  // "lockstep" | "free"
  std::vector<PositionDiff> positions;
  int64_t agree = 0, noise = 0, divergent = 0;
  double max_abs_logit_diff = 0;
  int64_t top1_flips = 0;            // positions whose top-1 changed (inside the margin or not)
  double min_top2_margin = 0;        // smallest uncached top-1 minus top-2 logit seen
  std::optional<FirstDivergence> first_divergence;
  std::optional<CacheAudit> audit_at_divergence;
  // The first cache operation that broke the contract (lockstep only).
  std::optional<RootCause> root_cause;
  // Lockstep, no root cause, and a policy evicted before the first
  // divergence: what the divergence follows (not a failure).
  std::optional<EvictionCause> eviction_cause;
  // Free-running: both token streams and the first index where they differ.
  std::vector<int64_t> cached_tokens, uncached_tokens;
  int64_t first_token_divergence = -1;

  bool diverged() const { return first_divergence.has_value(); }
  // What the CLI's exit code reports: outputs diverged (unless an intended
  // eviction explains it), or a cache operation broke the contract (a fault
  // whose drift stays inside numerical noise).
  bool failed() const { return (diverged() && !eviction_cause) || root_cause.has_value(); }
  // "diverged at round 2 position 10 because round 1's target prune ..."
  std::string explanation() const;
};

nlohmann::json toJson(const RowVerdict& verdict);
nlohmann::json toJson(const CacheAudit& audit, bool include_matrix);
nlohmann::json toJson(const RootCause& cause);
nlohmann::json toJson(const EvictionCause& cause);
nlohmann::json toJson(const DiffReport& report, bool include_positions);
// Inverses, for traces; each throws Error naming the problem.
RowState parseRowState(const std::string& name);
CacheAudit cacheAuditFromJson(const nlohmann::json& j);
RootCause rootCauseFromJson(const nlohmann::json& j);
DiffReport diffReportFromJson(const nlohmann::json& j);

}  // namespace kvscope
