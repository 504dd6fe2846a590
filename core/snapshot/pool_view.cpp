#include "core/snapshot/pool_view.h"

#include <algorithm>
#include <map>

#include "core/cache/block_pool.h"
#include "core/cache/block_table.h"
#include "core/cache/kv_cache.h"
#include "core/decode/session.h"
#include "core/snapshot/pooled_sequences.h"

namespace kvscope {
namespace {

std::vector<PoolLogEntry> logOf(const BlockPool& pool) {
  std::vector<PoolLogEntry> log;
  log.reserve(pool.log().size());
  for (const BlockLogEntry& e : pool.log()) {
    log.push_back(poolLogEntryOf(e));
  }
  return log;
}

// An entry dangles when the last logged operation on that (sequence, rows,
// block) was a free that left it mapped. Once the log has dropped it, the
// pool's owner says: a block the sequence no longer owns is not its own.
bool danglingEntry(const std::vector<PoolLogEntry>& log, const BlockPool& pool, int64_t sequence, int64_t first_row,
                   int64_t block) {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    if (it->sequence != sequence || it->block != block || it->first_position != first_row) continue;
    return it->operation == "free" && it->still_mapped;
  }
  return pool.owner(block) != sequence;
}

PoolSequenceTable tableOf(const KvCache& cache, const BlockPool& pool,
                          const std::vector<PoolLogEntry>& log) {
  const BlockTable& table = *cache.blockTable();
  PoolSequenceTable out;
  out.sequence = table.sequence();
  out.rows = cache.length(0);
  const std::vector<int64_t>& blocks = table.blocks();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t logical = static_cast<int64_t>(i);
    out.entries.push_back({logical, blocks[i], danglingEntry(log, pool, out.sequence, logical * table.blockSize(), blocks[i])});
  }
  return out;
}

// The ledger entry each physical row of the session's cache holds (layer 0).
std::vector<int64_t> heldEntries(const PooledSequence& member, CacheRole cache) {
  const Session& session = *member.session;
  const CacheLayout layout =
      session.events().layoutAfterEvents(cache, member.storage->numLayers(), session.events().events().size());
  return layout.empty() ? std::vector<int64_t>{} : layout.layers.front();
}

// The rows of a logical block that the owner's cache holds, with the position
// and token its ledger gives each.
std::vector<PoolRow> rowsOf(const Session& session, const std::vector<int64_t>& held, int64_t logical,
                            int64_t block_size) {
  std::vector<PoolRow> rows;
  for (int64_t offset = 0; offset < block_size; ++offset) {
    const int64_t row = logical * block_size + offset;
    if (row >= static_cast<int64_t>(held.size())) break;
    const LedgerEntry& entry = session.ledger().entry(held[static_cast<size_t>(row)]);
    rows.push_back({offset, entry.position, entry.token});
  }
  return rows;
}

}  // namespace

PoolLogEntry poolLogEntryOf(const BlockLogEntry& e) {
  return {blockOperationName(e.operation), e.block, e.sequence, e.first_position, e.still_mapped, e.moment};
}

int64_t PoolView::freeBlocks() const {
  return std::count_if(blocks.begin(), blocks.end(), [](const PoolBlock& b) { return b.owner < 0; });
}

int64_t PoolView::blocksOwnedBy(int64_t sequence) const {
  return std::count_if(blocks.begin(), blocks.end(), [sequence](const PoolBlock& b) { return b.owner == sequence; });
}

const PoolSequenceTable* PoolView::table(int64_t sequence) const {
  for (const PoolSequenceTable& t : tables) {
    if (t.sequence == sequence) return &t;
  }
  return nullptr;
}

std::optional<PoolPlace> PoolView::placeOfRow(int64_t sequence, int64_t row) const {
  const PoolSequenceTable* t = table(sequence);
  if (!t || row < 0 || block_size <= 0) return std::nullopt;
  const int64_t logical = row / block_size;
  if (logical >= static_cast<int64_t>(t->entries.size())) return std::nullopt;
  const PoolTableEntry& e = t->entries[static_cast<size_t>(logical)];
  return PoolPlace{logical, e.block, row % block_size, e.dangling};
}

std::optional<PoolView> poolViewOf(const std::vector<const Session*>& sequences, CacheRole cache) {
  const std::optional<PooledSequences> pooled = pooledSequences(sequences, cache);
  if (!pooled) return std::nullopt;
  const BlockPool& pool = *pooled->pool;
  PoolView view;
  view.cache = cache;
  view.block_size = pool.blockSize();
  view.log = logOf(pool);
  view.dropped_log = pool.droppedLogEntries();
  view.blocks.resize(static_cast<size_t>(pool.capacity()));
  for (int64_t b = 0; b < pool.capacity(); ++b) {
    view.blocks[static_cast<size_t>(b)].block = b;
    view.blocks[static_cast<size_t>(b)].owner = pool.owner(b);
  }
  for (size_t i = 0; i < view.log.size(); ++i) {
    const int64_t b = view.log[i].block;
    if (b >= 0 && b < pool.capacity()) view.blocks[static_cast<size_t>(b)].last_log = static_cast<int64_t>(i);
  }
  std::map<int64_t, PooledSequence> by_sequence;
  for (const PooledSequence& member : pooled->members) {
    view.tables.push_back(tableOf(*member.storage, pool, view.log));
    by_sequence.emplace(view.tables.back().sequence, member);
  }
  // Each owned block's rows come from its owner's books: the owner's table
  // entry that maps it and is not dangling names the logical block.
  for (const PoolSequenceTable& table : view.tables) {
    const PooledSequence& owner = by_sequence.at(table.sequence);
    const std::vector<int64_t> held = heldEntries(owner, cache);
    for (const PoolTableEntry& entry : table.entries) {
      PoolBlock& block = view.blocks[static_cast<size_t>(entry.block)];
      if (entry.dangling || block.owner != table.sequence) continue;
      block.logical = entry.logical;
      block.rows = rowsOf(*owner.session, held, entry.logical, view.block_size);
    }
  }
  return view;
}

std::string poolOwnerName(int64_t owner) { return owner < 0 ? "free" : "sequence " + std::to_string(owner); }

}  // namespace kvscope
