#include "core/cache/block_table.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {

BlockTable::BlockTable(std::shared_ptr<BlockPool> pool, int64_t sequence) : pool_(std::move(pool)), sequence_(sequence) {
  require(pool_ != nullptr, "BlockTable: a paged cache needs a block pool");
  require(sequence >= 0, "BlockTable: sequence ids must be >= 0, got " + std::to_string(sequence));
}

BlockTable::~BlockTable() {
  // Only blocks the pool still records as this sequence's go back: a
  // destructor must not throw.
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (!dangling_[i] && pool_->owner(blocks_[i]) == sequence_) {
      pool_->release(blocks_[i], sequence_, static_cast<int64_t>(i) * blockSize());
    }
  }
}

bool BlockTable::dangling(int64_t logical) const {
  return logical >= 0 && logical < static_cast<int64_t>(dangling_.size()) && dangling_[static_cast<size_t>(logical)];
}

void BlockTable::dropLastEntry() {
  const size_t last = blocks_.size() - 1;
  const int64_t first_row = static_cast<int64_t>(last) * blockSize();
  if (dangling_[last]) {
    pool_->noteUnmap(blocks_[last], sequence_, first_row, moment_);
  } else {
    pool_->release(blocks_[last], sequence_, first_row, /*still_mapped=*/false, moment_);
  }
  blocks_.pop_back();
  dangling_.pop_back();
}

void BlockTable::clear() {
  while (!blocks_.empty()) dropLastEntry();
}

void BlockTable::mapBlocksFor(int64_t rows) {
  while (mappedRows() < rows) {
    blocks_.push_back(pool_->allocate(sequence_, mappedRows(), moment_));
    dangling_.push_back(false);
  }
}

void BlockTable::write(int64_t layer, int64_t first_row, const at::Tensor& k, const at::Tensor& v) {
  const int64_t n = k.size(1);
  mapBlocksFor(first_row + n);
  at::Tensor& pool_k = pool_->keys(layer);    // [blocks, kv_heads, block_size, head_dim]
  at::Tensor& pool_v = pool_->values(layer);  // [blocks, kv_heads, block_size, head_dim]
  const int64_t size = blockSize();
  for (int64_t written = 0; written < n;) {
    const int64_t row = first_row + written;
    const int64_t offset = row % size;
    const int64_t count = std::min(size - offset, n - written);
    const int64_t block = blocks_[row / size];
    // Another sequence's block (a table still mapping a block it freed): the
    // owner's rows there are overwritten. A free block harms nobody yet.
    const int64_t owner = pool_->owner(block);
    if (owner >= 0 && owner != sequence_) pool_->noteForeignWrite(block, sequence_);
    pool_k.select(0, block).narrow(1, offset, count).copy_(k.narrow(1, written, count));
    pool_v.select(0, block).narrow(1, offset, count).copy_(v.narrow(1, written, count));
    written += count;
  }
}

at::Tensor BlockTable::gather(const at::Tensor& pool, int64_t rows) const {
  const int64_t size = blockSize();
  const int64_t used = (rows + size - 1) / size;
  require(used <= static_cast<int64_t>(blocks_.size()),
          "BlockTable: " + std::to_string(rows) + " rows asked for, " + std::to_string(mappedRows()) + " mapped");
  if (used == 0) return pool.select(0, 0).narrow(1, 0, 0);  // [kv_heads, 0, head_dim]
  // Attention takes one [kv_heads, T, head_dim] tensor, so the blocks are
  // gathered into a copy: O(T) per layer and forward, as attention itself,
  // where a serving kernel would read the blocks in place. The copy's values
  // and row order equal the contiguous layout's, so the logits are identical.
  const auto index = torch::tensor(std::vector<int64_t>(blocks_.begin(), blocks_.begin() + used), torch::kInt64);
  const auto picked = pool.index_select(0, index);  // [used, kv_heads, block_size, head_dim]
  return picked.permute({1, 0, 2, 3})
      .reshape({pool.size(1), used * size, pool.size(3)})  // [kv_heads, used * block_size, head_dim]
      .narrow(1, 0, rows);                                  // [kv_heads, rows, head_dim]
}

at::Tensor BlockTable::gatherKeys(int64_t layer, int64_t rows) const { return gather(pool_->keys(layer), rows); }

at::Tensor BlockTable::gatherValues(int64_t layer, int64_t rows) const { return gather(pool_->values(layer), rows); }

void BlockTable::keepRows(int64_t rows) {
  const int64_t size = blockSize();
  const size_t kept = static_cast<size_t>((rows + size - 1) / size);
  if (free_mapped_on_rollback_) {
    // The fault: the blocks go back to the pool, the table keeps mapping them.
    for (size_t i = blocks_.size(); i-- > kept;) {
      if (dangling_[i]) continue;
      pool_->release(blocks_[i], sequence_, static_cast<int64_t>(i) * size, /*still_mapped=*/true, moment_);
      dangling_[i] = true;
    }
    return;
  }
  // Freed last block first, so the block that held the sequence's end is the
  // first one reused.
  while (blocks_.size() > kept) dropLastEntry();
}

std::unique_ptr<BlockTable> BlockTable::copyTo(std::shared_ptr<BlockPool> copy_into, int64_t sequence,
                                               const std::vector<int64_t>& rows) const {
  auto copy = std::make_unique<BlockTable>(std::move(copy_into), sequence);
  require(copy->blockSize() == blockSize() && copy->pool_->shape().num_layers == pool_->shape().num_layers,
          "BlockTable::copyTo: the pools differ in shape");
  for (int64_t layer = 0; layer < static_cast<int64_t>(rows.size()); ++layer) {
    copy->write(layer, 0, gatherKeys(layer, rows[layer]), gatherValues(layer, rows[layer]));
  }
  copy->free_mapped_on_rollback_ = free_mapped_on_rollback_;
  copy->keep_length_on_rollback_ = keep_length_on_rollback_;
  return copy;
}

}  // namespace kvscope
