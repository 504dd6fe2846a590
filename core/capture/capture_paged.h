#pragma once
// Format version 3's `paged` field of a cache state (docs/capture-format-v3.md,
// "Paged pools"): a paged engine's block size, pool size, per layer and
// sequence the pool slot (block * block_size + offset) of each slot, and its
// free list. Validated here by name and bound against the state's own runs;
// a hostile file gets an Error naming the field, never a crash. Torch-free.
#include <nlohmann/json.hpp>

#include "core/capture/capture_manifest.h"

namespace kvscope::capture_paged {

constexpr int64_t kMaxBlockSize = int64_t{1} << 16;  // rows per block
constexpr int64_t kMaxPoolSlots = int64_t{1} << 30;  // block_size * num_blocks

// `state` is the state's JSON (`what` names it, e.g. "call 3 (target index 1):
// before"); `parsed` its layers as parseCacheState read them. Refuses `paged`
// in a version 1 or 2 file, block_size or num_blocks outside their bounds, a
// layer or sequence count other than the state's, a run whose pool slot is
// outside the pool or whose counts do not tile the layer's slots, padding
// (-2) where the row runs hold none or a pool slot where they hold padding,
// and free runs outside [0, num_blocks). Absent `paged`: nullopt.
std::optional<CapturePagedState> parsePagedState(const std::string& path, const std::string& what, const nlohmann::json& state,
                        const CaptureCacheState& parsed, const CaptureManifest& manifest);

}  // namespace kvscope::capture_paged
