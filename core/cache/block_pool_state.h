#pragma once
// A block pool's bookkeeping without its tensors: how many blocks it holds,
// who owns each one, and what every sequence's block table maps, rebuilt by
// replaying the pool's log (core/cache/block_log.h) one entry at a time.
// The pool keeps one for the operations its bounded log dropped (so a replay
// of the log it keeps starts from the right pool), and the GUI's pool view
// replays the log to the moment the cursor shows (core/snapshot/pool_history.h).
// Torch-free.
#include <cstdint>
#include <map>
#include <vector>

#include "core/cache/block_log.h"

namespace kvscope {

struct BlockPoolState {
  // One entry of a sequence's block table.
  struct Mapping {
    int64_t block = 0;
    // Freed while still mapped (the free-mapped fault): the pool may have
    // handed the block to another sequence.
    bool dangling = false;
  };

  int64_t block_size = 1;
  int64_t capacity = 0;         // blocks the pool holds
  std::vector<int64_t> owners;  // per block: owning sequence, -1 while free
  // Per sequence, its table: logical block -> mapping (logical i holds rows
  // [i * block_size, (i + 1) * block_size)).
  std::map<int64_t, std::map<int64_t, Mapping>> tables;
  BlockMoment last;  // the moment of the last entry applied (unstamped: none)

  BlockPoolState() = default;
  BlockPoolState(int64_t block_size, int64_t initial_blocks);

  // The pool and tables just after `entry`: an allocate or reuse maps the
  // block at the end of its sequence's table (a fresh block past the pool's
  // size means the pool doubled, as BlockPool grows); a free returns it and
  // unmaps it, or marks the mapping dangling when it stayed mapped; an unmap
  // drops the mapping.
  void apply(const BlockLogEntry& entry);
  int64_t owner(int64_t block) const;
};

}  // namespace kvscope
