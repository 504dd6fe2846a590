#pragma once
// One sequence's rows in a shared BlockPool (core/cache/block_pool.h): its
// block table maps the sequence's i-th block of rows [i * block_size,
// (i + 1) * block_size) to a pool block, the same block in every layer. A
// paged KvCache keeps one and reads and writes its rows through it; the
// lengths stay the KvCache's. docs/paged-cache.md describes the layout.
//
// Two switches inject the bugs a paged layout breeds (a correct engine never
// sets them; the bug zoo, core/cache/fault.h, will):
// - free-mapped-on-rollback: a rollback returns the blocks past the kept rows
//   to the pool but leaves them in the table, so the sequence still reads and
//   writes them after the pool handed them to another sequence;
// - keep-length-on-rollback: a rollback neither shortens the sequence nor
//   frees its blocks, so the rows past the accepted ones stay readable
//   (enforced by KvCache, which owns the lengths).
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/block_pool.h"
#include "core/cache/pool_picture.h"

namespace kvscope {

class BlockTable {
 public:
  BlockTable(std::shared_ptr<BlockPool> pool, int64_t sequence);
  ~BlockTable();  // returns the blocks it still owns to the pool
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  const std::shared_ptr<BlockPool>& pool() const { return pool_; }
  int64_t sequence() const { return sequence_; }
  int64_t blockSize() const { return pool_->blockSize(); }
  // The pool blocks the table maps, in row order (including blocks a fault freed).
  const std::vector<int64_t>& blocks() const { return blocks_; }
  // Whether entry `logical` was freed while still mapped (the free-mapped
  // fault); false past the table.
  bool dangling(int64_t logical) const;
  int64_t mappedRows() const { return static_cast<int64_t>(blocks_.size()) * blockSize(); }

  // Writes k, v ([kv_heads, n, head_dim]) at rows [first_row, first_row + n)
  // of the layer, mapping new blocks as the rows need them.
  void write(int64_t layer, int64_t first_row, const at::Tensor& k, const at::Tensor& v);
  // [kv_heads, rows, head_dim]: rows [0, rows) of the layer in row order.
  at::Tensor gatherKeys(int64_t layer, int64_t rows) const;
  at::Tensor gatherValues(int64_t layer, int64_t rows) const;
  // Frees every block past the first `rows` rows (a partially kept block stays).
  // With free-mapped-on-rollback set, they are freed but stay mapped.
  void keepRows(int64_t rows);
  // Frees every block and empties the table (a reset, never faulted).
  void clear();

  // The moment of the cache operation under way (core/cache/block_log.h),
  // logged with every pool operation the table makes until it is set again;
  // the tracked cache sets it around each operation and clears it after.
  void setMoment(const BlockMoment& moment) { moment_ = moment; }
  const BlockMoment& moment() const { return moment_; }

  void setFreeMappedOnRollback(bool on) { free_mapped_on_rollback_ = on; }
  bool freeMappedOnRollback() const { return free_mapped_on_rollback_; }
  void setKeepLengthOnRollback(bool on) { keep_length_on_rollback_ = on; }
  bool keepLengthOnRollback() const { return keep_length_on_rollback_; }

  // The pool around each forward of this table's cache, by its event's
  // index in the session's log: what a capture of a paged batch writes
  // (core/check/batch_capture_writer.h). The tracked cache takes them
  // (core/cache/tracked_cache.cpp); the table only holds them. A copy
  // (copyTo) starts without any.
  ForwardPoolPictures& forwardPictures() { return forward_pictures_; }
  const ForwardPoolPictures& forwardPictures() const { return forward_pictures_; }

  // A table of `copy_into`'s pool under `sequence` holding copies of rows
  // [0, rows[layer]) of every layer, with the same fault switches.
  std::unique_ptr<BlockTable> copyTo(std::shared_ptr<BlockPool> copy_into, int64_t sequence,
                                     const std::vector<int64_t>& rows) const;

 private:
  void mapBlocksFor(int64_t rows);
  // Drops the last entry: returns its block to the pool, or, for a dangling
  // entry the pool already has back, logs that the table no longer maps it.
  void dropLastEntry();
  at::Tensor gather(const at::Tensor& pool, int64_t rows) const;

  std::shared_ptr<BlockPool> pool_;
  int64_t sequence_;
  std::vector<int64_t> blocks_;
  // Per entry of blocks_: freed by the free-mapped fault while still mapped
  // (the pool may have handed it to another sequence; never freed again).
  std::vector<bool> dangling_;
  bool free_mapped_on_rollback_ = false;
  bool keep_length_on_rollback_ = false;
  ForwardPoolPictures forward_pictures_;
  BlockMoment moment_;
};

}  // namespace kvscope
