#pragma once
// A paged pool's history (docs/paged-cache.md): what it takes to draw the
// pool at any moment of the run, the moment the GUI's cursor shows. The
// pool's log carries the moment of each operation (core/cache/block_log.h),
// so the view at a moment is that log replayed up to it, from the pool as it
// stood before the oldest entry the log keeps; each block's rows (position
// and token) come from its owner's books replayed to the same moment.
//
// Replayed rather than a view kept per moment: a view holds every row of
// every block, so one per moment would grow with the square of the run's
// length, where the log and the books grow with it linearly and a replay to
// one moment costs one pass over them.
//
// Torch-free and Qt-free: a snapshot carries it to the GUI.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/cache/block_pool_state.h"
#include "core/cache/cache_event_log.h"
#include "core/snapshot/pool_view.h"

namespace kvscope {

class Session;

struct PoolRowIdentity {
  int64_t position = 0;
  int64_t token = 0;
};

// One sequence's books as the pool view reads them.
struct PoolSequenceBooks {
  int64_t sequence = 0;
  // Its operations on the pool's cache, in order, kept to what replaying
  // layer 0 reads (core/cache/cache_event_log.h's applyEventToLayer): the
  // ledger entry each row holds at a moment.
  std::vector<CacheEvent> events;
  std::vector<PoolRowIdentity> entries;  // per ledger entry of the session
};

struct PoolHistory {
  CacheRole cache = CacheRole::Target;
  int64_t block_size = 0;
  BlockPoolState start;           // the pool before the oldest entry of `log`
  std::vector<BlockLogEntry> log;  // the operations the pool keeps, oldest first, with their moments
  int64_t dropped_log = 0;        // older operations, folded into `start`
  std::vector<PoolSequenceBooks> sequences;  // every sequence that shares the pool, by sequence id
};

// The history of the pool the sequences' `cache` caches share; nullopt when
// those caches are contiguous or absent. `sequences` as for poolViewOf.
std::optional<PoolHistory> poolHistoryOf(const std::vector<const Session*>& sequences, CacheRole cache);

// The pool just after `moment` ran: every logged operation at or before it
// replayed (an operation made outside any cache operation counts with the
// one before it). nullopt: every operation, the pool as the run left it.
PoolView poolViewAt(const PoolHistory& history, const std::optional<Moment>& moment);

}  // namespace kvscope
