#pragma once
// A capture of another engine, checked, as the snapshot every view of the
// debugger reads (core/snapshot/snapshot.h): the KV view, row history, the
// token strip, the timeline and the diff panel then show the captured rows
// with their identity and verdict through the same code as a session.
// The views read the record the check walked (capture_record_view.h): rounds
// inferred from the target's calls, events in the order they happened.
#include <memory>
#include <string>
#include <vector>

#include "core/check/capture_check.h"
#include "core/check/capture_record_view.h"
#include "core/check/capture_timeline.h"
#include "core/snapshot/snapshot.h"

namespace kvscope {

class SnapshotBuilder;

// The check's findings in the diff panel's terms: the root cause as is (the
// check walked `view`'s record), the symptom as the first divergence, and
// the breach's rows as an audit of the cache at the root cause.
DiffReport captureDiffReport(const CaptureTimeline& timeline, const CaptureRecordView& view,
                             const CaptureCheckReport& report);

struct CaptureSnapshotSource {
  std::string path;               // the capture file
  std::string engine;             // the manifest's engine name
  std::string target_name;
  std::string drafter_name;       // "none" without a drafter
  std::shared_ptr<const std::vector<std::string>> vocab;  // null: token ids shown as <id N>
  std::vector<std::string> notes;  // what was not checked and why
  // The target's reference: verify attention recomputed over the captured
  // rows (capture_attention.h). Null: Verify Attention stays empty.
  const CausalLM* target = nullptr;
};

// The snapshot of a checked capture (replay only: nothing to step). Takes the
// record the check walked (`view`, moved in: its record gains the verify attention).
std::shared_ptr<SessionSnapshot> captureSnapshot(const CaptureFile& file, const CaptureTimeline& timeline,
                                                 CaptureRecordView view, const CaptureCheckReport& report,
                                                 const CaptureSnapshotSource& source, SnapshotBuilder& builder);

}  // namespace kvscope
