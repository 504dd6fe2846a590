#include "core/snapshot/pooled_sequences.h"

#include "core/cache/block_pool.h"
#include "core/cache/block_table.h"

namespace kvscope {
namespace {

const KvCache* cacheOf(const Session& session, CacheRole cache) {
  return cache == CacheRole::Target ? session.targetCache() : session.drafterCache();
}

const std::shared_ptr<BlockPool>& poolOf(const Session& session, CacheRole cache) {
  return cache == CacheRole::Target ? session.batchPlace().target_pool : session.batchPlace().drafter_pool;
}

}  // namespace

std::optional<PooledSequences> pooledSequences(const std::vector<const Session*>& sequences, CacheRole cache) {
  if (sequences.empty() || !sequences.front()) return std::nullopt;
  const std::shared_ptr<BlockPool>& shared = poolOf(*sequences.front(), cache);
  const KvCache* first = cacheOf(*sequences.front(), cache);
  if (!shared || !first || !first->paged()) return std::nullopt;
  PooledSequences pooled{shared, {}};
  for (const Session* session : sequences) {
    const KvCache* storage = session ? cacheOf(*session, cache) : nullptr;
    if (!storage || !storage->paged() || storage->blockTable()->pool() != shared) continue;
    pooled.members.push_back({session, storage});
  }
  return pooled;
}

}  // namespace kvscope
