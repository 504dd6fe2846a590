#include "core/capture/capture_change.h"

#include <algorithm>
#include <unordered_set>

namespace kvscope {
namespace {

bool holdsNothing(const std::vector<int64_t>& slots) {
  return std::all_of(slots.begin(), slots.end(), [](int64_t row) { return row < 0; });
}

// Every row of `part` (empty slots aside) appears in `whole` in the same order.
bool isSubsequence(const std::vector<int64_t>& part, const std::vector<int64_t>& whole) {
  size_t at = 0;
  for (int64_t row : part) {
    if (row < 0) continue;
    while (at < whole.size() && whole[at] != row) ++at;
    if (at == whole.size()) return false;
    ++at;
  }
  return true;
}

}  // namespace

CaptureBetweenKind deriveChange(const std::vector<int64_t>& returned, const std::vector<int64_t>& received) {
  if (returned == received) return CaptureBetweenKind::None;
  if (holdsNothing(received)) return holdsNothing(returned) ? CaptureBetweenKind::None : CaptureBetweenKind::Reset;
  if (received.size() < returned.size() && std::equal(received.begin(), received.end(), returned.begin())) {
    return CaptureBetweenKind::Crop;
  }
  const std::unordered_set<int64_t> known(returned.begin(), returned.end());
  const bool new_rows = std::any_of(received.begin(), received.end(),
                                    [&](int64_t row) { return row >= 0 && known.count(row) == 0; });
  if (received.size() == returned.size()) return new_rows ? CaptureBetweenKind::Overwrite : CaptureBetweenKind::Roll;
  if (!new_rows && isSubsequence(received, returned)) return CaptureBetweenKind::Slice;
  return CaptureBetweenKind::Replace;
}

CaptureBetweenKind deriveStateChange(const std::vector<std::vector<int64_t>>& returned,
                                     const std::vector<std::vector<int64_t>>& received) {
  const size_t layers = std::max(returned.size(), received.size());
  static const std::vector<int64_t> kNone;
  for (size_t l = 0; l < layers; ++l) {
    const CaptureBetweenKind kind =
        deriveChange(l < returned.size() ? returned[l] : kNone, l < received.size() ? received[l] : kNone);
    if (kind != CaptureBetweenKind::None) return kind;
  }
  return CaptureBetweenKind::None;
}

}  // namespace kvscope
