#pragma once
// One sequence of a batched capture (docs/capture-format-v2.md) as a capture
// of that sequence alone, so every reader of version 1 — the timeline, the
// root-cause walk, the reference streams, the GUI — judges a batch one
// sequence at a time, with no second walk.
//
// Sequence b's view of each call keeps its own inputs and positions without
// the pads, its slots without the padding slots (a padding slot is a key the
// call's mask hid from that sequence: a pad of its prompt, or a rejected
// draft an engine hides rather than removes), its committed tokens, and its
// part of the logits. Row ids are the file's: a row belongs to one sequence.
// A call that carried nothing but pads for b (a finished sequence kept in
// the batch) is left out of b's view; the calls kept keep their indices, so
// the view names calls as the engine counted them.
#include <cstdint>
#include <string>
#include <vector>

#include "core/capture/capture_manifest.h"

namespace kvscope {

// A tensor of the view: sequence `sequence`'s rows [first_row, first_row +
// rows) of the file's tensor `of`, whose shape is [B, R, ...].
struct CaptureSlice {
  std::string name;
  std::string of;
  int64_t sequence = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
};

struct CaptureSequenceView {
  CaptureManifest manifest;          // version 1 shaped: batch 1, sequence b's values in the v1 fields
  std::vector<CaptureSlice> slices;  // the tensors it names that the file holds as slices
};

// Throws Error naming the call for what a one-sequence view cannot hold yet:
// padding slots in a static or ring layer (their slot index is the cache
// position), pads between a sequence's real inputs, an explicit (per-query)
// mask in a batch.
CaptureSequenceView captureSequenceView(const CaptureManifest& manifest, int64_t sequence, const std::string& path);

}  // namespace kvscope
