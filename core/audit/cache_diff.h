#pragma once
// The cache differential debugger: cached against uncached, per position.
//
// Lockstep: the cached session runs normally (with any injected fault); after
// each draft and verify pass, the same tokens are recomputed without a cache
// (teacher-forced on the cached side's tokens, so positions line up) and the
// logits are compared. At the first divergence the cache is audited to name
// the layer and head. Free-running: a cached and an uncached session each
// sample their own tokens; the first token where they differ is reported.
// The report it returns: diff_report.h.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/cache_audit.h"
#include "core/audit/diff_report.h"
#include "core/audit/root_cause.h"
#include "core/decode/session.h"

namespace kvscope {

// Compares one set of logits rows; exposed for tests.
PositionDiff comparePosition(const at::Tensor& cached_logits, const at::Tensor& uncached_logits,
                             const DiffTolerances& tolerances);

// Steps `session` (which must use the cache) to the end, diffing as it goes,
// then finds the root cause. `text` names tokens in the explanation.
DiffReport diffLockstep(Session& session, const DiffTolerances& tolerances = {},
                        const std::atomic<bool>* cancel = nullptr, const TokenText& text = {});

// diffLockstep's two parts, for a driver that steps the session itself (a
// batch's, core/audit/batch_diff.h): after the session ran `phase` of
// `round`, compare its logits with the uncached recomputation; at the end,
// find the root cause (named with the session's batch sequence).
void compareLockstepPhase(DiffReport& report, const Session& session, Phase phase, int64_t round,
                          const DiffTolerances& tolerances);
void concludeLockstep(DiffReport& report, const Session& session, const TokenText& text = {});

// Runs both sessions to the end and compares their tokens and, up to the
// first token divergence, their verify logits.
DiffReport diffFreeRunning(Session& cached, Session& uncached, const DiffTolerances& tolerances = {});

}  // namespace kvscope
