#pragma once
// The limits of a .kvcapture file (docs/capture-format.md, section 7). Each
// is checked before anything sized by the count it bounds is allocated.
// Torch-free.
#include <cstdint>

#include "core/model/json_limits.h"

namespace kvscope::capture_limits {

constexpr int64_t kMaxCalls = 1000000;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxRows = int64_t{1} << 24;        // rows per role and layer
constexpr int64_t kMaxSlots = int64_t{1} << 24;       // slots per layer of a state
constexpr int64_t kMaxInputs = int64_t{1} << 20;      // input tokens per call
constexpr int64_t kMaxKvHeads = 1024;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxLogitsWidth = int64_t{1} << 24;  // also the largest vocab_size
constexpr int64_t kMaxTopK = 65536;
constexpr int64_t kMaxCommitted = int64_t{1} << 24;  // committed ids, all sequences together
// Slots of one state across its layers (and a batch's sequences), and of
// every state of the file together. A run of 2^24 empty slots is 12 bytes of
// JSON, but the timeline lays every slot out and the contract walk gives each
// attended slot a verdict: 2^24 attended slots of one layer took 2.9 GB and
// 2^22 still 1.8 GB, so the per-layer limit alone let a 377 KB file cost
// gigabytes and minutes. 2^20 slots keep a state's walk near 0.5 GB. A static
// cache of 32 layers x 32,768 slots fits a state; 2^24 slots are, say, 340
// calls of 24 layers x 1,024 static slots before and after.
constexpr int64_t kMaxStateSlots = int64_t{1} << 20;
constexpr int64_t kMaxCaptureSlots = int64_t{1} << 24;
// A position (and a cache_position) of any version: RoPE takes 32-bit
// positions, and a bound here keeps every sum a reader forms of a position and
// a count (the span of a call's inputs, the slots before its first position)
// far from int64 overflow.
constexpr int64_t kMaxPosition = (int64_t{1} << 31) - 1;
// Free text (engine name, recorder, model name or path, cache class, a
// between's description, tensor names): long enough for any path or version
// string, short enough that a window laying it out or an error quoting it
// stays instant (a 200 KB engine name took a report view 8 s to lay out).
constexpr size_t kMaxTextBytes = 4096;
// Version 2 (a batch): at most 1024 sequences; a call's inputs across the batch
// stay within kMaxInputs and a state layer's slots across the batch within
// kMaxSlots, so a batch multiplies nothing the version 1 limits bound.
constexpr int64_t kMaxBatch = 1024;

// The manifest is a JSON document inside a metadata string of a header
// already capped at 100,000,000 bytes. 16 levels hold the deepest field
// (calls[i].before.layers[l][r][0] is level 6); 8,000,000 values keep the
// parsed document under ~1 GB while the bundled 48-token capture has ~40,000.
// Repeated keys are refused: which of two "index" fields counts is not
// something a reader should guess.
inline const JsonLimits kManifestJsonLimits{"capture manifest", 100000000, 16, 8000000, true, true};

}  // namespace kvscope::capture_limits
