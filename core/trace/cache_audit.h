#pragma once
// The cache audit: recompute K and V for the tokens a cache should hold, from
// scratch, and compare them with what the cache holds, per layer, head and
// position. A wrong entry is located exactly, not just noticed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cache/kv_cache.h"
#include "core/model/causal_lm.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct AuditTolerance {
  // A cell is bad when |cached - fresh| > absolute + relative * max|fresh row|.
  double absolute = 1e-4;
  double relative = 1e-3;  // fp16 storage rounds by <= 4.9e-4 relative: inside
};

struct AuditCell {
  int64_t round = 0;
  int64_t layer = 0;
  int64_t head = 0;
  int64_t position = 0;
  double error = 0;    // max |delta| over K and V, this head and position; inf for a missing/extra row
  std::string kind;    // "value" (wrong numbers), "extra" (row beyond the tokens), "missing" (row not there)
};

struct AuditReport {
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  int64_t expected_length = 0;               // tokens the cache should hold
  std::vector<int64_t> physical_lengths;     // rows per layer
  // [layer][position]: max |delta| over heads and dims (K and V); positions
  // 0 .. max(expected, rows) - 1; +inf marks a missing or extra row.
  std::vector<std::vector<double>> error;
  double max_value_error = 0;  // over cells present on both sides
  std::optional<AuditCell> first_bad;  // smallest position, then layer, then head
  int64_t bad_cells = 0;

  bool clean() const { return !first_bad.has_value(); }
};

// expected_tokens: what the cache should hold (the engine's own belief).
AuditReport auditCache(const CausalLM& model, const KvCache& cache, const std::vector<int64_t>& expected_tokens,
                       CacheRole role, int64_t round, const AuditTolerance& tolerance = {});

nlohmann::json toJson(const AuditReport& report, bool include_matrix);

}  // namespace kvscope
