#pragma once
// The cached-vs-uncached diff's report (core/audit/cache_diff.h makes it):
// per-position logit differences, the first divergence, the audit at it and
// the root cause. Torch-free and Qt-free: the CLI writes it as JSON, traces
// keep it, and the GUI reads it from snapshots.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/audit/audit_report.h"
#include "core/audit/root_cause_report.h"
#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

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

nlohmann::json toJson(const DiffReport& report, bool include_positions);
// The inverse, for traces; throws Error naming the problem.
DiffReport diffReportFromJson(const nlohmann::json& j);

}  // namespace kvscope
