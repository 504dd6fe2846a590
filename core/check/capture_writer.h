#pragma once
// kvscope's own engine writes the .kvcapture format (docs/capture-format.md)
// any other engine writes, from a session's record: one call per forward
// (append) event of each cache, its inputs in the order they were fed with
// the rotary positions applied, the physical rows of every layer before and
// after (so whatever changed between two calls, a fault's included, is in the
// states), the verify passes' logits. `kvscope-cli check` then reads it
// without knowing it came from kvscope: every fault of the bug zoo must be
// named there as the diff names it.
#include <string>
#include <vector>

#include "core/model/causal_lm.h"
#include "core/trace/session_record.h"

namespace kvscope {

struct CaptureModelSource {
  std::string name_or_path;  // the model directory
  const CausalLM* model = nullptr;
};

// Throws Error for what the format cannot hold: an uncached session, or an
// eviction policy's masks (rows masked per kv head, not removed).
// drafter.model null: a session without a drafter model (n-gram drafting).
void writeSessionCapture(const std::string& path, const SessionRecord& record, const CaptureModelSource& target,
                         const CaptureModelSource& drafter, const std::string& engine);

// A batch (one record per sequence, in batch order) as version 2
// (docs/capture-format-v2.md, docs/batching.md#captures-of-a-batch): each
// joined forward one call of B sequences, a narrower sequence's missing
// inputs as left pads whose slots are padding, never stored.
void writeBatchCapture(const std::string& path, const std::vector<const SessionRecord*>& records,
                       const CaptureModelSource& target, const CaptureModelSource& drafter, const std::string& engine);

}  // namespace kvscope
