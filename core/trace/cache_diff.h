#pragma once
// The cache differential debugger: cached against uncached, per position.
//
// Lockstep: the cached session runs normally (with any injected fault); after
// each draft and verify pass, the same tokens are recomputed without a cache
// (teacher-forced on the cached side's tokens, so positions line up) and the
// logits are compared. At the first divergence the cache is audited to name
// the layer and head. Free-running: a cached and an uncached session each
// sample their own tokens; the first token where they differ is reported.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/decode/session.h"
#include "core/trace/cache_audit.h"

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
  int64_t position = 0;
  std::optional<int64_t> layer;  // from the audit at that moment
  std::optional<int64_t> head;
};

struct DiffReport {
  std::string mode;  // "lockstep" | "free"
  std::vector<PositionDiff> positions;
  int64_t agree = 0, noise = 0, divergent = 0;
  double max_abs_logit_diff = 0;
  int64_t top1_flips = 0;            // positions whose top-1 changed (inside the margin or not)
  double min_top2_margin = 0;        // smallest uncached top-1 minus top-2 logit seen
  std::optional<FirstDivergence> first_divergence;
  std::optional<AuditReport> audit_at_divergence;
  // Free-running: both token streams and the first index where they differ.
  std::vector<int64_t> cached_tokens, uncached_tokens;
  int64_t first_token_divergence = -1;

  bool diverged() const { return first_divergence.has_value(); }
};

// Compares one set of logits rows; exposed for tests.
PositionDiff comparePosition(const at::Tensor& cached_logits, const at::Tensor& uncached_logits,
                             const DiffTolerances& tolerances);

// Steps `session` (which must use the cache) to the end, diffing as it goes.
DiffReport diffLockstep(Session& session, const DiffTolerances& tolerances = {},
                        const std::atomic<bool>* cancel = nullptr);

// Runs both sessions to the end and compares their tokens and, up to the
// first token divergence, their verify logits.
DiffReport diffFreeRunning(Session& cached, Session& uncached, const DiffTolerances& tolerances = {});

nlohmann::json toJson(const DiffReport& report, bool include_positions);

}  // namespace kvscope
