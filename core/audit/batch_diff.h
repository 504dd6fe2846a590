#pragma once
// The lockstep diff of a batch (core/decode/batch_session.h): every sequence
// is compared with its own uncached recomputation after each draft and
// verify phase, as diffLockstep compares one, and each gets its root cause.
// The batch's root cause is the breach that happened first: the earliest
// round, then phase, then the target's cache before the drafter's; between
// sequences that broke at the same moment (in one batched forward, or one
// batch rollback) the lowest sequence is named, and every sequence's own
// report keeps its root cause.
#include <atomic>
#include <optional>
#include <vector>

#include "core/audit/cache_diff.h"
#include "core/decode/batch_session.h"

namespace kvscope {

struct BatchDiffReport {
  std::vector<DiffReport> sequences;  // one per sequence, in batch order
  // The sequence whose root cause happened first (nullopt: no sequence broke the contract).
  std::optional<size_t> first_broken;

  const RootCause* rootCause() const {
    return first_broken ? &*sequences[*first_broken].root_cause : nullptr;
  }
  // Any sequence failed as diffLockstep's report fails.
  bool failed() const;
  // "sequence 2: diverged at round 3 ... because ..." or what held.
  std::string explanation() const;
};

BatchDiffReport diffBatchLockstep(BatchSession& batch, const DiffTolerances& tolerances = {},
                                  const std::atomic<bool>* cancel = nullptr, const TokenText& text = {});

// Whether root cause a happened before b (round, phase, the target's cache
// first, then the lower sequence).
bool happenedBefore(const RootCause& a, const RootCause& b);

}  // namespace kvscope
