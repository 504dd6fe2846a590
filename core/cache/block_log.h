#pragma once
// The lines of a block pool's log (core/cache/block_pool.h): which block went
// to or came back from which sequence, for which rows, and the moment of the
// run it happened at, in the run's own terms: the round and phase of the
// cache operation that did it and that operation's index in its sequence's
// cache event log (core/cache/cache_event_log.h), the numbers the rest of the
// books (the ledger, the root cause) use. Torch-free, so the GUI's pool view
// and its replay (core/cache/block_pool_state.h) read it.
#include <cstdint>
#include <string>

#include "core/cache/cache_types.h"

namespace kvscope {

enum class BlockOperation {
  Allocate,  // a fresh block mapped at the end of a sequence's table
  Reuse,     // a freed block handed out again, mapped at the end of a table
  Free,      // a block returned to the pool (unmapped, unless still_mapped)
  // A table dropped an entry whose block it had freed earlier while keeping
  // it mapped (a dangling entry): no block changes owner, only the table.
  Unmap,
};
std::string blockOperationName(BlockOperation operation);

// When a pool operation happened: during the cache operation of round
// `round`, phase `phase`, logged as event `event` of its sequence's cache
// event log. round -1: outside any logged cache operation (a table built or
// destroyed by hand, a test driving a KvCache directly).
struct BlockMoment {
  int64_t round = -1;
  Phase phase = Phase::Prefill;
  int64_t event = -1;

  bool stamped() const { return round >= 0; }
  Moment moment() const { return {round, phase}; }
};

struct BlockLogEntry {
  BlockOperation operation = BlockOperation::Allocate;
  int64_t block = -1;
  int64_t sequence = -1;
  // The positions the block holds for that sequence: [first_position, first_position + block_size).
  int64_t first_position = 0;
  // A Free that left the block in the sequence's table (a fault; see BlockTable).
  bool still_mapped = false;
  BlockMoment moment;
};

}  // namespace kvscope
