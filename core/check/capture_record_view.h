#pragma once
// A capture's cache timeline in the order its operations happened, with the
// rounds inferred: the record the one root-cause walker (core/audit/
// contract_walk.h) walks for `check`, and the debugger's views draw.
//
// Rounds are inferred from the target's calls: round 0 is the target's
// first call (the prefill), round k its call k with the drafter calls that
// produced that call's drafts. The timeline lists a change between two calls
// of a role just before the call that revealed it; it happened earlier: a
// rollback follows the verify that decided it. So such a change is placed
// where kvscope's own loop makes it, in the prune at the end of the round
// before, the target's first (its verify decided what both caches must
// drop). Each role's own order is kept. A breach is then found where it
// happened, before any symptom a later call of the other role shows.
// Each event keeps the call it stands for (CacheEvent::call), so the views
// name the user's calls, not only kvscope's phases.
#include <cstddef>
#include <vector>

#include "core/check/capture_timeline.h"
#include "core/trace/session_record.h"

namespace kvscope {

struct CaptureRecordView {
  SessionRecord record;
  std::vector<size_t> event_of_step;  // timeline step -> index into record.events
  std::vector<size_t> step_of_event;  // index into record.events -> timeline step
};
CaptureRecordView captureRecordView(const CaptureTimeline& timeline);

}  // namespace kvscope
