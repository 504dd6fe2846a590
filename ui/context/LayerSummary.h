#pragma once
// One number per (layer, kv head) of a cache at a moment, for the overview
// that lets a 32-layer model be browsed at a glance: the largest |K| (or |V|)
// among the rows the layer holds, and per layer how many rows break the
// bookkeeping (stale, duplicate, wrong position, missing) and the worst of
// them. Plain functions over the snapshot, like RowLookup.
#include <cstdint>
#include <vector>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

struct LayerSummary {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t first_kv_head = 0;    // the model's number of head 0 (a tensor-parallel rank's cache)
  std::vector<float> max_abs;   // [layers, kv_heads] row-major: max |K| or |V| over the held rows
  std::vector<int> bad_rows;    // per layer: rows whose verdict is not Ok, missing rows included
  std::vector<RowState> worst;  // per layer: the most severe verdict (Ok when none)
  std::vector<int> rows;        // per layer: physical rows held

  float maxAbs(int64_t layer, int64_t head) const {
    return max_abs[static_cast<size_t>(layer * kv_heads + head)];
  }
};

LayerSummary layerSummary(const SessionSnapshot& snapshot, CacheRole cache, const Moment& moment, bool values);

}  // namespace kvscope::ui
