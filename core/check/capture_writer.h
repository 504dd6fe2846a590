#pragma once
// kvscope's own engine writes the .kvcapture format (docs/capture-format.md)
// any other engine writes, from a session's record: one call per forward
// (append) event of each cache, its inputs in the order they were fed with
// the rotary positions applied, the physical rows of every layer before and
// after (so whatever changed between two calls, a fault's included, is in the
// states), the verify passes' logits. `kvscope-cli check` then reads it
// without knowing it came from kvscope: every fault of the bug zoo must be
// named there as the diff names it. A batch: batch_capture_writer.h.
#include <string>

#include "core/check/capture_writing.h"
#include "core/model/causal_lm.h"
#include "core/trace/session_record.h"

namespace kvscope {

// Throws Error for what the format cannot hold: an uncached session, or an
// eviction policy's masks (rows masked per kv head, not removed).
// drafter.model null: a session without a drafter model (n-gram drafting).
void writeSessionCapture(const std::string& path, const SessionRecord& record, const CaptureModelSource& target,
                         const CaptureModelSource& drafter, const std::string& engine);

}  // namespace kvscope
