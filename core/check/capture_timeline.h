#pragma once
// A capture of another engine as a cache timeline (docs/architecture.md,
// "Rows are not positions"): every forward call of each role, and the change
// between two calls of a role, becomes one cache event on the same ledger and
// event log kvscope's own sessions keep. Each captured row is a ledger entry
// whose identity comes from the call that wrote it: the input token, the
// position the input belongs at in the run's token stream, and the position
// the engine's rotary embedding used. Each event carries what the contract
// required after it, so the checker (capture_check.h) walks it the way the
// root cause walks a session.
//
// The token streams. The committed sequence C (rec.commit, else inferred) is
// the truth. A target call k starts at the frontier F_k: the rows it may keep
// are C[0:F_k], its first input must be C[F_k] (the prompt, or the token the
// previous verify chose), the rest are drafts; the accepted inputs move the
// frontier on. Round k's stream is C[0:F_k + 1] followed by target call k's
// drafts: the target's verify is checked against it. The drafter is judged
// against its own history, not against a call that came after it: its round-k
// stream is C[0:F_k + 1] (what the target decided before) followed by the
// drafts the drafter itself fed that round. So a verify that breaks the
// sequence cannot make the drafter calls before it look wrong. Drafter calls
// after the last target call start from C.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/capture/capture_file.h"
#include "core/trace/session_record.h"

namespace kvscope {

enum class CaptureOperation { Forward, Between };
const char* captureOperationName(CaptureOperation operation);  // "forward", "between"

CacheRole cacheRoleOf(CaptureRole role);

// One event of the timeline, in run order.
struct CaptureStep {
  CaptureRole role = CaptureRole::Target;
  // The role's call; for a change between calls, the next call (the first to
  // see the changed cache).
  int64_t call = 0;
  CaptureOperation operation = CaptureOperation::Forward;
  CaptureBetweenKind change = CaptureBetweenKind::None;  // Between: derived from the two states
  int64_t round = 0;   // the target call whose round it belongs to (target calls after the last: their count)
  int64_t stream = 0;  // index into CaptureTimeline::streams: what the step is judged against
  // Forward: the position the inputs belong at in the stream, the position
  // the engine's rotary embedding gave the first, and the row the first
  // landed in (the rows the call attends before its inputs).
  int64_t true_start = 0;
  int64_t claimed_start = 0;
  int64_t landed_row = 0;
  int64_t inputs = 0;
  bool static_cache = false;  // the role's cache is a fixed buffer written at cache_position
  bool uncached = false;      // Forward: the call returned no cache (use_cache=False)
  size_t manifest_call = 0;   // index into the manifest's calls
  // Forward: inputs of a growing (append) cache that no layer holds a row of.
  std::vector<int64_t> unwritten;
  // Forward with an attention mask: the entry in each slot of layer 0 of the
  // after state (the mask's key axis), the empty-slot entry for empty slots.
  std::vector<int64_t> mask_slots;
};

struct CaptureTimeline {
  // sequence = the committed tokens; ledger: one entry per captured row (and
  // one per role standing for an empty slot); events: one per step, each
  // with its layout given outright.
  SessionRecord record;
  std::vector<CaptureStep> steps;             // parallel to record.events.events()
  // [0, T]: round k's stream for the target (T = target calls; T: C itself);
  // then, per round the drafter drafted in, the drafter's own stream.
  std::vector<std::vector<int64_t>> streams;
  // [target calls + 1]: the committed tokens decided before each target call
  // (its frontier), then after the last one.
  std::vector<int64_t> frontiers;
  bool committed_inferred = false;
  int64_t empty_entry[kCaptureRoles] = {-1, -1};
  // The window of a role's ring layers (0: none).
  int64_t window[kCaptureRoles] = {0, 0};

  const CacheEvent& event(size_t step) const { return record.events.events()[step]; }
  const std::vector<int64_t>& streamOf(size_t step) const {
    return streams[static_cast<size_t>(steps[step].stream)];
  }
};

// Throws Error for a capture of more than one sequence (a batch, format
// version 2) given whole: the timeline replays one sequence, and a verdict
// about sequence 0 alone would pass for the whole run's. A batch is checked
// one sequence at a time (CaptureFile::sequence, sequence_check.h).
void requireOneSequence(const CaptureFile& file);

// Builds the timeline of one sequence (requireOneSequence first). Throws Error for what the
// format allows but the timeline cannot represent yet (layers of one role
// with different kv heads or head dims).
CaptureTimeline buildCaptureTimeline(const CaptureFile& file);

}  // namespace kvscope
