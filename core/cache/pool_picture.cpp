#include "core/cache/pool_picture.h"

#include <string>

#include "core/cache/block_table.h"
#include "core/error.h"

namespace kvscope {

int64_t PoolPicture::poolSlot(int64_t row) const {
  const int64_t block = block_size > 0 ? row / block_size : -1;
  if (row < 0 || block < 0 || block >= static_cast<int64_t>(table.size())) {
    throw Error("pool picture: row " + std::to_string(row) + " is past the " + std::to_string(table.size()) +
                " block(s) of " + std::to_string(block_size) + " rows its block table maps");
  }
  return table[static_cast<size_t>(block)] * block_size + row % block_size;
}

PoolPicture pictureOf(const BlockTable& table) {
  const BlockPool& pool = *table.pool();
  PoolPicture picture;
  picture.block_size = table.blockSize();
  picture.num_blocks = pool.capacity();
  picture.table = table.blocks();
  for (int64_t block = 0; block < picture.num_blocks; ++block) {
    if (pool.owner(block) < 0) picture.free.push_back(block);
  }
  return picture;
}

}  // namespace kvscope
