#pragma once
// kvscope's own block pool as a capture of a paged batch writes it
// (docs/capture-format-v3.md, "Paged pools"; docs/batching.md#captures-of-a-batch):
// one sequence's block table and the pool's size and free blocks, read at
// one moment. A paged cache's tracked cache keeps, per forward, one from when
// the forward was asked for and one from right after it was logged (its
// BlockTable holds them), since the pool a batch shares changes between
// them. Torch-free plain records.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace kvscope {

class BlockTable;

struct PoolPicture {
  int64_t block_size = 0;
  int64_t num_blocks = 0;      // the pool's blocks at that moment (it grows)
  std::vector<int64_t> table;  // the blocks the sequence's table maps, in row order (a freed one included)
  std::vector<int64_t> free;   // the pool's free blocks, ascending (those never handed out included)

  // The pool slot (block * block_size + offset) of the sequence's row `row`;
  // throws Error when the table maps no block for it.
  int64_t poolSlot(int64_t row) const;
};

struct PoolAroundForward {
  PoolPicture before;  // when the forward was asked for
  PoolPicture after;   // when its event was logged
};
// By the index of the forward's event in its session's cache event log.
using ForwardPoolPictures = std::map<size_t, PoolAroundForward>;

// The table's sequence and its pool, now.
PoolPicture pictureOf(const BlockTable& table);

}  // namespace kvscope
