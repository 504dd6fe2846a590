#include "core/cache/block_pool_state.h"

namespace kvscope {
namespace {

// Drops the mapping of `logical` when it maps `block` (a table maps each
// logical block once; a line about another block leaves it alone).
void unmap(std::map<int64_t, BlockPoolState::Mapping>& table, int64_t logical, int64_t block) {
  const auto it = table.find(logical);
  if (it != table.end() && it->second.block == block) table.erase(it);
}

}  // namespace

BlockPoolState::BlockPoolState(int64_t block_size_, int64_t initial_blocks)
    : block_size(block_size_ > 0 ? block_size_ : 1), capacity(initial_blocks), owners(static_cast<size_t>(initial_blocks), -1) {}

void BlockPoolState::apply(const BlockLogEntry& entry) {
  if (entry.block < 0) return;
  // BlockPool hands out fresh blocks in order and doubles when none is left.
  while (entry.block >= capacity) capacity = capacity > 0 ? 2 * capacity : 1;
  owners.resize(static_cast<size_t>(capacity), -1);
  const int64_t logical = entry.first_position / block_size;
  std::map<int64_t, Mapping>& table = tables[entry.sequence];
  switch (entry.operation) {
    case BlockOperation::Allocate:
    case BlockOperation::Reuse:
      owners[static_cast<size_t>(entry.block)] = entry.sequence;
      table[logical] = {entry.block, false};
      break;
    case BlockOperation::Free:
      owners[static_cast<size_t>(entry.block)] = -1;
      if (entry.still_mapped) {
        table[logical] = {entry.block, true};
      } else {
        unmap(table, logical, entry.block);
      }
      break;
    case BlockOperation::Unmap:
      unmap(table, logical, entry.block);
      break;
  }
  last = entry.moment;
}

int64_t BlockPoolState::owner(int64_t block) const {
  return block >= 0 && block < static_cast<int64_t>(owners.size()) ? owners[static_cast<size_t>(block)] : -1;
}

}  // namespace kvscope
