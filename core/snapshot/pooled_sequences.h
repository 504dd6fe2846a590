#pragma once
// The sequences of a batch whose cache (target's or drafter's) lives in one
// shared block pool: what the pool's view and its history both read.
#include <memory>
#include <optional>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/decode/session.h"

namespace kvscope {

class BlockPool;

struct PooledSequence {
  const Session* session;
  const KvCache* storage;  // its `cache`, paged in the pool
};

struct PooledSequences {
  std::shared_ptr<BlockPool> pool;
  std::vector<PooledSequence> members;  // in the order given
};

// The first sequence's pool for `cache`, and every sequence (the first
// included) whose paged cache maps into it; none when the first has no
// such pool or its cache is not paged. Null sessions are skipped.
std::optional<PooledSequences> pooledSequences(const std::vector<const Session*>& sequences, CacheRole cache);

}  // namespace kvscope
