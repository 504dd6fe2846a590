#pragma once
// The row audit's report (core/audit/cache_audit.h makes it): each physical
// row's verdict against the bookkeeping and, with a model, against a
// recomputation. Torch-free and Qt-free: the CLI writes it as JSON, traces
// keep it, and the GUI reads it from snapshots.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// Padding: a padded batch's pad row (docs/batching.md), no position of the
// sequence; not a fault while attention hides it (the walker checks that).
enum class RowState { Ok, Stale, Missing, Duplicate, WrongPosition, WrongValues, Padding };
// "ok", "stale", "missing", "duplicate", "wrong_position", "wrong_values", "padding"
const char* rowStateName(RowState state);

struct AuditTolerance {
  // A row is wrong when |cached - fresh| > absolute + relative * max|fresh row|
  // (per head). The defaults are float32 rows' (core/audit/kv_tolerance.h
  // gives the rule for every storage dtype): a session computes and stores in
  // float32, so only the order of sums differs from a recomputation.
  double absolute = 1e-5;
  double relative = 1e-4;
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
  int64_t padding_rows = 0;     // (layer, row) pairs holding a padded batch's pad rows (not in `rows`)
  double max_value_error = 0;   // over rows comparable with the recomputation
  // (layer, row) pairs whose values were not compared: written after an
  // eviction policy masked rows, their K/V in layers > 0 come from attention
  // over the compressed cache, and a full-cache recomputation is not their
  // reference (layer 0's depend on the token and position only: compared).
  int64_t not_comparable_after_eviction = 0;
  // [layer][row]: max(|dK|, |dV|) of each physical row (+inf: identity
  // broken, NaN: values not checked).
  std::vector<std::vector<double>> error;
  // A paged cache: the pool blocks its table maps at this moment that its
  // sequence does not own (docs/paged-cache.md); whatever another sequence
  // writes there becomes these rows, so the cache is not clean even while
  // every row still holds what it should.
  std::vector<DanglingBlock> dangling_blocks;

  bool clean() const { return rows.empty() && dangling_blocks.empty(); }
  const RowVerdict* firstBad() const { return rows.empty() ? nullptr : &rows.front(); }
};

nlohmann::json toJson(const RowVerdict& verdict);
nlohmann::json toJson(const CacheAudit& audit, bool include_matrix);
// The inverses, for traces; each throws Error naming the problem.
RowState parseRowState(const std::string& name);
CacheAudit cacheAuditFromJson(const nlohmann::json& j);

}  // namespace kvscope
