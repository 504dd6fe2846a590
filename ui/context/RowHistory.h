#pragma once
// A cache row's history for the GUI: the core's row history (core/audit/
// row_history.h: every cache operation that touched one ledger entry in one
// layer, with its effect, the row's physical row and verdict after it, and
// what a fault did there) read from a snapshot, plus the attention the row
// received in each verify pass, which only the snapshot holds.
#include <cstdint>
#include <vector>

#include "core/audit/row_history.h"
#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

struct RowAttention {
  int64_t round = 0;
  std::vector<float> per_head;  // attention received, summed over the verify queries, per query head
};

struct RowHistory {
  int64_t entry = -1;
  CacheRole cache = CacheRole::Target;
  int64_t layer = 0;
  std::vector<RowHistoryItem> events;
  std::vector<RowAttention> attention;  // target rows only: per verify round it was a key of
};

RowHistory rowHistory(const SessionSnapshot& snapshot, int64_t entry, int64_t layer);

}  // namespace kvscope::ui
