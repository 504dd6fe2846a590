#pragma once
// How a cache stores its rows: one contiguous tensor per layer (the default)
// or blocks of a shared pool (core/cache/block_pool.h), written
// `contiguous` or `paged[:BLOCK]` (`--cache-layout`; block 16 by default, as
// vLLM's). docs/paged-cache.md describes the paged layout.
// Plain data without libtorch: session options hold it (core/decode/session_options.h).
#include <cstdint>
#include <string>

namespace kvscope {

struct StorageLayout {
  static constexpr int64_t kDefaultBlockSize = 16;
  // Largest block accepted: far above what engines use (16 to 256 rows), and
  // small enough that one block of a real model fits in memory.
  static constexpr int64_t kMaxBlockSize = 4096;
  bool paged = false;
  int64_t block_size = kDefaultBlockSize;  // rows per block; paged only
};

// Parses `contiguous`, `paged` or `paged:BLOCK`; throws Error naming the text
// and what is accepted (a block size of 1 to kMaxBlockSize).
StorageLayout parseStorageLayout(const std::string& text);
std::string storageLayoutName(const StorageLayout& layout);

}  // namespace kvscope
