#pragma once
// A capture checked sequence by sequence: each sequence of a batch is its
// own run (docs/capture-format-v2.md), seen alone through
// CaptureFile::sequence and checked by the one walk (capture_check.h). The
// run's root cause is the breach that happened first in the engine's run,
// whichever sequence it broke, and names that sequence; a capture of one
// sequence is checked exactly as before.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/check/capture_check.h"

namespace kvscope {

// When something happened in the engine's run, comparable across sequences
// (and across the ranks of one run, whose files share the call order): the
// position in the file's call order of the call it happened in or after,
// then whether it was a change between calls (after that call), then the
// target's before the drafter's (as the walked record orders a prune).
using RunTime = std::tuple<size_t, int, int>;

// One sequence's own verdict.
struct SequenceVerdict {
  int64_t sequence = 0;
  std::optional<RootCause> root_cause;
  std::optional<CaptureDivergence> first_divergence;
  // Per target call index: the drafts the call's verify accepted for this
  // sequence (the committed tokens it moved on, less its own); -1 for the
  // prefill and for a call that fed this sequence nothing.
  std::vector<int64_t> accepted;
  bool ok() const { return !root_cause && !first_divergence; }
};

struct SequenceCheck {
  CaptureCheckReport report;              // the run's: its root cause the earliest breach of any sequence
  std::vector<SequenceVerdict> sequences;  // per sequence, in order
  int64_t shown_sequence = 0;             // the sequence whose timeline is kept below
  std::optional<RunTime> root_cause_time;   // when the run's root cause happened
  std::optional<RunTime> divergence_time;   // when its first divergence did
  // The shown sequence's view, timeline and walked record (the GUI draws them).
  std::shared_ptr<const CaptureFile> view;
  std::optional<CaptureTimeline> timeline;
  std::optional<CaptureRecordView> record;

  // The sequences with a breach or a divergence, as "0, 2" ("none").
  std::string brokenSequences() const;
  // The run's report with the shown sequence's root cause and symptom: what
  // a view of `record` (that sequence's events) can point at.
  CaptureCheckReport shownReport() const;
};

// Checks every sequence and keeps the timeline of `show` (a sequence; -1:
// the root cause's, else 0). Throws Error for what a sequence's view or
// timeline cannot represent, naming it.
SequenceCheck checkEverySequence(const CaptureFile& file, const CaptureCheckOptions& options, const TokenText& text = {},
                                 int64_t show = -1);

}  // namespace kvscope
