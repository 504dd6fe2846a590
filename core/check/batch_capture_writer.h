#pragma once
// kvscope's own batch written as a capture (docs/batching.md#captures-of-a-batch):
// the format a batched engine's recorder writes, so `kvscope-cli check`
// reads every sequence from the file alone. One sequence: capture_writer.h.
#include <string>
#include <vector>

#include "core/cache/pool_picture.h"
#include "core/check/capture_writing.h"
#include "core/trace/session_record.h"

namespace kvscope {

class BatchSession;

// A paged batch's pools around each forward, per sequence and cache
// (BlockTable::forwardPictures); null for a contiguous cache.
struct SequencePoolPictures {
  const ForwardPoolPictures* target = nullptr;
  const ForwardPoolPictures* drafter = nullptr;
};

// A batch (one record per sequence, in batch order) as version 2
// (docs/capture-format-v2.md): each joined forward one call of B sequences,
// a narrower sequence's missing inputs as left pads whose slots are padding,
// never stored. A paged batch (`pools`: one entry per sequence, as
// poolPicturesOf gives them) is written as version 3 (docs/capture-format-v3.md,
// "Paged pools"): each call's states say where every slot lives in the pool,
// and the pool's size and free list, as they were around the joined forward.
// Throws Error for what one sequence's capture refuses, for an empty batch or
// one of more than 1024 sequences, and for pools not one per sequence.
void writeBatchCapture(const std::string& path, const std::vector<const SessionRecord*>& records,
                       const CaptureModelSource& target, const CaptureModelSource& drafter, const std::string& engine,
                       const std::vector<SequencePoolPictures>& pools = {});

// The pool pictures of a batch's sequences' caches (all null when contiguous).
std::vector<SequencePoolPictures> poolPicturesOf(const BatchSession& batch);

}  // namespace kvscope
