#pragma once
// A cache row's history for the GUI: the core's row history (core/audit/
// row_history.h: every cache operation that touched one ledger entry in one
// layer, with its effect, the row's physical row and verdict after it, and
// what a fault did there) read from a snapshot, plus the attention the row
// received in each verify pass, which only the snapshot holds.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/row_history.h"
#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

struct RowAttention {
  int64_t round = 0;
  std::vector<float> per_head;  // attention received, summed over the verify queries, per query head
};

// Where a paged cache's row sits in its block pool (docs/paged-cache.md):
// its sequence's logical block and offset, and the pool block that holds it.
// The pool is known as the run left it, so a row that is gone since is
// placed by its logical block only (block -1).
struct RowBlock {
  int64_t logical = 0;
  int64_t offset = 0;
  int64_t block = -1;
  bool dangling = false;  // the table still maps the block after freeing it
};
// "block 5, offset 2", or "logical block 1, offset 2" for a row gone since.
std::string rowBlockText(const RowBlock& place);

struct RowHistory {
  int64_t entry = -1;
  CacheRole cache = CacheRole::Target;
  int64_t layer = 0;
  std::vector<RowHistoryItem> events;
  std::vector<RowAttention> attention;  // target rows only: per verify round it was a key of
  // Per event (paged caches only; empty otherwise): the row's block after it, nullopt where it is not held.
  std::vector<std::optional<RowBlock>> blocks;
};

RowHistory rowHistory(const SessionSnapshot& snapshot, int64_t entry, int64_t layer);

}  // namespace kvscope::ui
