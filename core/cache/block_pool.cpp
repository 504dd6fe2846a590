#include "core/cache/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {

BlockPool::BlockPool(const BlockPoolShape& shape, c10::TensorOptions storage, int64_t initial_blocks,
                     size_t log_capacity)
    : shape_(shape), storage_(storage), log_capacity_(log_capacity) {
  require(shape.num_layers > 0 && shape.kv_heads > 0 && shape.head_dim > 0,
          "BlockPool: layers, kv heads and head_dim must be positive");
  require(shape.block_size >= 1 && shape.block_size <= kMaxBlockSize,
          "BlockPool: block size " + std::to_string(shape.block_size) + " is out of range (1 to " +
              std::to_string(kMaxBlockSize) + " rows)");
  require(initial_blocks >= 1 && initial_blocks <= kMaxInitialBlocks,
          "BlockPool: initial block count " + std::to_string(initial_blocks) + " is out of range (1 to " +
              std::to_string(kMaxInitialBlocks) + ")");
  keys_.resize(shape.num_layers);
  values_.resize(shape.num_layers);
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    keys_[l] = torch::zeros({initial_blocks, shape.kv_heads, shape.block_size, shape.head_dim}, storage_);
    values_[l] = torch::zeros_like(keys_[l]);
  }
  owners_.assign(initial_blocks, -1);
  log_start_ = BlockPoolState(shape.block_size, initial_blocks);
  foreign_writes_.assign(initial_blocks, 0);
  foreign_writer_.assign(initial_blocks, -1);
}

int64_t BlockPool::blocksInUse() const {
  return static_cast<int64_t>(std::count_if(owners_.begin(), owners_.end(), [](int64_t o) { return o >= 0; }));
}

void BlockPool::grow(int64_t blocks) {
  for (int64_t l = 0; l < shape_.num_layers; ++l) {
    for (at::Tensor* pool : {&keys_[l], &values_[l]}) {
      auto grown = torch::zeros({blocks, shape_.kv_heads, shape_.block_size, shape_.head_dim}, storage_);
      grown.narrow(0, 0, pool->size(0)).copy_(*pool);  // [old blocks, kv, block_size, D]
      *pool = grown;
    }
  }
  owners_.resize(blocks, -1);
  foreign_writes_.resize(blocks, 0);
  foreign_writer_.resize(blocks, -1);
}

int64_t BlockPool::allocate(int64_t sequence, int64_t first_position, const BlockMoment& moment) {
  require(sequence >= 0, "BlockPool::allocate: sequence ids must be >= 0, got " + std::to_string(sequence));
  int64_t block;
  BlockOperation operation;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
    operation = BlockOperation::Reuse;
  } else {
    // Geometric growth: amortised O(1) per block, as KvCache grows its rows.
    if (next_fresh_ == capacity()) grow(2 * capacity());
    block = next_fresh_++;
    operation = BlockOperation::Allocate;
  }
  owners_[block] = sequence;
  record({operation, block, sequence, first_position, false, moment});
  return block;
}

void BlockPool::release(int64_t block, int64_t sequence, int64_t first_position, bool still_mapped,
                        const BlockMoment& moment) {
  checkBlock(block, "release");
  if (owners_[block] != sequence) {
    throw Error("BlockPool::release: sequence " + std::to_string(sequence) + " frees block " + std::to_string(block) +
                (owners_[block] < 0 ? std::string(", which is already free")
                                    : ", which sequence " + std::to_string(owners_[block]) + " owns"));
  }
  owners_[block] = -1;
  free_.push_back(block);
  record({BlockOperation::Free, block, sequence, first_position, still_mapped, moment});
}

void BlockPool::noteUnmap(int64_t block, int64_t sequence, int64_t first_position, const BlockMoment& moment) {
  checkBlock(block, "noteUnmap");
  record({BlockOperation::Unmap, block, sequence, first_position, false, moment});
}

int64_t BlockPool::owner(int64_t block) const {
  checkBlock(block, "owner");
  return owners_[block];
}

void BlockPool::noteForeignWrite(int64_t block, int64_t writer) {
  checkBlock(block, "noteForeignWrite");
  ++foreign_writes_[static_cast<size_t>(block)];
  foreign_writer_[static_cast<size_t>(block)] = writer;
}

int64_t BlockPool::foreignWrites(int64_t block) const {
  checkBlock(block, "foreignWrites");
  return foreign_writes_[static_cast<size_t>(block)];
}

int64_t BlockPool::lastForeignWriter(int64_t block) const {
  checkBlock(block, "lastForeignWriter");
  return foreign_writer_[static_cast<size_t>(block)];
}

void BlockPool::record(const BlockLogEntry& entry) {
  if (log_capacity_ == 0) {
    log_start_.apply(entry);
    ++dropped_;
    return;
  }
  if (log_.size() == log_capacity_) {
    log_start_.apply(log_.front());
    log_.pop_front();
    ++dropped_;
  }
  log_.push_back(entry);
}

void BlockPool::checkBlock(int64_t block, const char* what) const {
  if (block < 0 || block >= capacity()) {
    throw Error(std::string("BlockPool::") + what + ": block " + std::to_string(block) + " out of range (" +
                std::to_string(capacity()) + " blocks)");
  }
}

void BlockPool::checkLayer(int64_t layer) const {
  if (layer < 0 || layer >= shape_.num_layers) {
    throw Error("BlockPool: layer " + std::to_string(layer) + " out of range (" + std::to_string(shape_.num_layers) +
                " layers)");
  }
}

at::Tensor& BlockPool::keys(int64_t layer) {
  checkLayer(layer);
  return keys_[layer];
}

at::Tensor& BlockPool::values(int64_t layer) {
  checkLayer(layer);
  return values_[layer];
}

const at::Tensor& BlockPool::keys(int64_t layer) const {
  checkLayer(layer);
  return keys_[layer];
}

const at::Tensor& BlockPool::values(int64_t layer) const {
  checkLayer(layer);
  return values_[layer];
}

}  // namespace kvscope
