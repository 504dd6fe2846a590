#pragma once
// What happened to one layer of a captured cache between two calls of a role,
// derived from the slots the role's previous call returned and the slots the
// next call received (docs/capture-format.md, section 6: readers derive it;
// the recorder's hint is informational). Torch-free.
#include <cstdint>
#include <vector>

#include "core/capture/capture_manifest.h"

namespace kvscope {

// `returned`: the row ids of the previous call's after state, `received`:
// those of the next call's before state (-1 for an empty slot).
//   None      the same slots
//   Reset     nothing held any more (rows were held before)
//   Crop      a prefix of the slots kept
//   Slice     a sub-sequence of the rows kept, in order, not a prefix
//   Roll      the same slot count, the same rows, in other slots
//   Overwrite the same slot count, some slots holding rows nobody returned
//   Replace   anything else
CaptureBetweenKind deriveChange(const std::vector<int64_t>& returned, const std::vector<int64_t>& received);

// The change of a whole state: the first layer's that is not None (layers
// change together in every cache the format knows).
CaptureBetweenKind deriveStateChange(const std::vector<std::vector<int64_t>>& returned,
                                     const std::vector<std::vector<int64_t>>& received);

}  // namespace kvscope
