#pragma once
// kvscope's own batch written as a capture (docs/batching.md#captures-of-a-batch):
// the format a batched engine's recorder writes, so `kvscope-cli check`
// reads every sequence from the file alone. One sequence: capture_writer.h.
#include <string>
#include <vector>

#include "core/check/capture_writing.h"
#include "core/trace/session_record.h"

namespace kvscope {

// A batch (one record per sequence, in batch order) as version 2
// (docs/capture-format-v2.md): each joined forward one call of B sequences,
// a narrower sequence's missing inputs as left pads whose slots are padding,
// never stored. Throws Error for what one sequence's capture refuses, and
// for an empty batch or one of more than 1024 sequences.
void writeBatchCapture(const std::string& path, const std::vector<const SessionRecord*>& records,
                       const CaptureModelSource& target, const CaptureModelSource& drafter, const std::string& engine);

}  // namespace kvscope
