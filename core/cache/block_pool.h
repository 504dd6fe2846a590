#pragma once
// A pool of fixed-size KV blocks shared by several sequences, as serving
// engines keep their cache (vLLM's PagedAttention blocks, llama.cpp's cells):
// per layer, K and V of shape [blocks, kv_heads, block_size, head_dim]. A
// sequence owns blocks through its block table (core/cache/block_table.h);
// block b of every layer belongs to the same sequence, so one table serves all
// layers. Freed blocks go to a free list and are handed out again, most
// recently freed first (which makes a reused block easy to predict and to show).
// The pool grows geometrically when no block is free; growing keeps every
// block's number, so block tables stay valid.
//
// Every allocation, free and reuse is logged (which block, which sequence,
// which positions, and the moment of the run: core/cache/block_log.h), and
// so is a table dropping a dangling entry; the log is bounded to the most
// recent `log_capacity` operations, and the pool keeps what the dropped ones
// left (logStart), so the log it keeps replays to any later moment.
// docs/paged-cache.md describes the layout.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include "core/cache/block_log.h"
#include "core/cache/block_pool_state.h"
#include "core/cache/storage_layout.h"

namespace kvscope {

struct BlockPoolShape {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
};

class BlockPool {
 public:
  static constexpr int64_t kMaxBlockSize = StorageLayout::kMaxBlockSize;
  static constexpr int64_t kMaxInitialBlocks = 1 << 16;

  BlockPool(const BlockPoolShape& shape, c10::TensorOptions storage, int64_t initial_blocks = 4,
            size_t log_capacity = 4096);

  const BlockPoolShape& shape() const { return shape_; }
  int64_t blockSize() const { return shape_.block_size; }
  c10::TensorOptions storage() const { return storage_; }
  int64_t capacity() const { return keys_.front().size(0); }  // blocks the pool holds
  int64_t blocksInUse() const;
  int64_t freeBlocks() const { return static_cast<int64_t>(free_.size()) + capacity() - next_fresh_; }

  // A block for `sequence`, holding its positions [first_position, +block_size):
  // the most recently freed block if any (logged as Reuse), else a fresh one
  // (Allocate), growing the pool when it is full. `moment` is logged with it.
  int64_t allocate(int64_t sequence, int64_t first_position, const BlockMoment& moment = {});
  // Returns the block to the free list. Throws Error if `sequence` does not
  // own it (a double free, or another sequence's block).
  void release(int64_t block, int64_t sequence, int64_t first_position, bool still_mapped = false,
               const BlockMoment& moment = {});
  // Logs that `sequence`'s table dropped its entry for the block it had
  // freed while still mapping it (Unmap): nothing changes in the pool, but
  // a replay of the log needs to know the table no longer maps it.
  void noteUnmap(int64_t block, int64_t sequence, int64_t first_position, const BlockMoment& moment = {});
  // The sequence that owns the block, -1 while it is free.
  int64_t owner(int64_t block) const;
  // A write into the block by a sequence that does not own it (a table that
  // still maps a freed block): counted per block, with the last writer, so
  // the owner's books can find its overwritten rows.
  void noteForeignWrite(int64_t block, int64_t writer);
  int64_t foreignWrites(int64_t block) const;
  int64_t lastForeignWriter(int64_t block) const;

  // [blocks, kv_heads, block_size, head_dim] of one layer; write through it,
  // never keep it across an allocate (growing replaces the tensor).
  at::Tensor& keys(int64_t layer);
  at::Tensor& values(int64_t layer);
  const at::Tensor& keys(int64_t layer) const;
  const at::Tensor& values(int64_t layer) const;

  // The most recent operations, oldest first, and how many older ones were dropped.
  const std::deque<BlockLogEntry>& log() const { return log_; }
  int64_t droppedLogEntries() const { return dropped_; }
  // The pool and its tables as they stood before the oldest entry log()
  // keeps (the initial empty pool until the log drops an entry): replaying
  // log() on it gives the pool at any moment the log reaches.
  const BlockPoolState& logStart() const { return log_start_; }

 private:
  void grow(int64_t blocks);
  void record(const BlockLogEntry& entry);
  void checkBlock(int64_t block, const char* what) const;
  void checkLayer(int64_t layer) const;

  BlockPoolShape shape_;
  c10::TensorOptions storage_;
  std::vector<at::Tensor> keys_;    // per layer [blocks, kv_heads, block_size, head_dim]
  std::vector<at::Tensor> values_;  // per layer [blocks, kv_heads, block_size, head_dim]
  std::vector<int64_t> owners_;     // per block: owning sequence, -1 when free
  std::vector<int64_t> foreign_writes_;  // per block: writes by sequences that did not own it
  std::vector<int64_t> foreign_writer_;  // per block: the last such writer, -1 if none
  std::vector<int64_t> free_;       // freed blocks; back() is handed out next
  int64_t next_fresh_ = 0;          // blocks [next_fresh_, capacity) were never handed out
  std::deque<BlockLogEntry> log_;
  size_t log_capacity_;
  int64_t dropped_ = 0;
  BlockPoolState log_start_;  // the dropped entries replayed
};

}  // namespace kvscope
