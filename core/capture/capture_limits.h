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
// Version 2 (a batch): at most 1024 sequences; a call's inputs across the batch
// stay within kMaxInputs and a state layer's slots across the batch within
// kMaxSlots, so a batch multiplies nothing the version 1 limits bound.
constexpr int64_t kMaxBatch = 1024;
constexpr int64_t kMaxPosition = (int64_t{1} << 31) - 1;  // a version 2 position (RoPE takes 32-bit positions)

// The manifest is a JSON document inside a metadata string of a header
// already capped at 100,000,000 bytes. 16 levels hold the deepest field
// (calls[i].before.layers[l][r][0] is level 6); 8,000,000 values keep the
// parsed document under ~1 GB while the bundled 48-token capture has ~40,000.
// Repeated keys are refused: which of two "index" fields counts is not
// something a reader should guess.
inline const JsonLimits kManifestJsonLimits{"capture manifest", 100000000, 16, 8000000, true, true};

}  // namespace kvscope::capture_limits
