#include "core/snapshot/pool_history.h"

#include <algorithm>

#include "core/cache/block_pool.h"
#include "core/cache/block_table.h"
#include "core/cache/kv_cache.h"
#include "core/decode/session.h"
#include "core/snapshot/pooled_sequences.h"

namespace kvscope {
namespace {

// The event as far as replaying layer 0 reads it: the rest (every other
// layer's counts, the fault's words, masks, dangling blocks) is dropped, so
// the history a snapshot copies stays small.
CacheEvent layerZeroOf(const CacheEvent& event) {
  CacheEvent kept;
  kept.cache = event.cache;
  kept.round = event.round;
  kept.phase = event.phase;
  kept.kind = event.kind;
  kept.rows_before.assign(event.rows_before.begin(), event.rows_before.begin() + std::min<size_t>(1, event.rows_before.size()));
  kept.rows_after.assign(event.rows_after.begin(), event.rows_after.begin() + std::min<size_t>(1, event.rows_after.size()));
  kept.layers = event.layers;
  kept.written = event.written;
  kept.removed = event.removed;
  kept.policy = event.policy;
  if (!event.layout.empty()) kept.layout.push_back(event.layout.front());
  return kept;
}

PoolSequenceBooks booksOf(const Session& session, int64_t sequence, CacheRole cache) {
  PoolSequenceBooks books;
  books.sequence = sequence;
  for (const CacheEvent& e : session.events().events()) {
    if (e.cache == cache) books.events.push_back(layerZeroOf(e));
  }
  books.entries.reserve(static_cast<size_t>(session.ledger().size()));
  for (const LedgerEntry& e : session.ledger().entries()) books.entries.push_back({e.position, e.token});
  return books;
}

// The ledger entries layer 0 of the sequence's cache holds just after `moment`, in row order.
std::vector<int64_t> heldAt(const PoolSequenceBooks& books, const std::optional<Moment>& moment) {
  std::vector<int64_t> rows;
  for (const CacheEvent& e : books.events) {
    if (moment && !atOrBefore(e.moment(), *moment)) break;  // a session logs in moment order
    applyEventToLayer(rows, e, 0);
  }
  return rows;
}

// The rows of a logical block the owner holds, with the position and token its books give each.
std::vector<PoolRow> rowsOf(const PoolSequenceBooks& books, const std::vector<int64_t>& held, int64_t logical,
                            int64_t block_size) {
  std::vector<PoolRow> rows;
  for (int64_t offset = 0; offset < block_size; ++offset) {
    const int64_t row = logical * block_size + offset;
    if (row >= static_cast<int64_t>(held.size())) break;
    const int64_t entry = held[static_cast<size_t>(row)];
    if (entry < 0 || entry >= static_cast<int64_t>(books.entries.size())) continue;
    const PoolRowIdentity& identity = books.entries[static_cast<size_t>(entry)];
    rows.push_back({offset, identity.position, identity.token});
  }
  return rows;
}

bool happenedBy(const BlockMoment& when, const std::optional<Moment>& moment) {
  return !moment || !when.stamped() || atOrBefore(when.moment(), *moment);
}

}  // namespace

std::optional<PoolHistory> poolHistoryOf(const std::vector<const Session*>& sequences, CacheRole cache) {
  const std::optional<PooledSequences> pooled = pooledSequences(sequences, cache);
  if (!pooled) return std::nullopt;
  const BlockPool& pool = *pooled->pool;
  PoolHistory history;
  history.cache = cache;
  history.block_size = pool.blockSize();
  history.start = pool.logStart();
  history.dropped_log = pool.droppedLogEntries();
  history.log.assign(pool.log().begin(), pool.log().end());
  for (const PooledSequence& member : pooled->members) {
    history.sequences.push_back(booksOf(*member.session, member.storage->blockTable()->sequence(), cache));
  }
  std::sort(history.sequences.begin(), history.sequences.end(),
            [](const PoolSequenceBooks& a, const PoolSequenceBooks& b) { return a.sequence < b.sequence; });
  return history;
}

PoolView poolViewAt(const PoolHistory& history, const std::optional<Moment>& moment) {
  PoolView view;
  view.cache = history.cache;
  view.block_size = history.block_size;
  view.dropped_log = history.dropped_log;
  view.moment = moment;
  BlockPoolState state = history.start;
  view.before_log = moment && state.last.stamped() && !atOrBefore(state.last.moment(), *moment);
  // The log is in the order things happened: its entries up to the moment.
  for (const BlockLogEntry& e : history.log) {
    if (!happenedBy(e.moment, moment)) break;
    state.apply(e);
    view.log.push_back(poolLogEntryOf(e));
  }
  view.blocks.resize(static_cast<size_t>(state.capacity));
  for (int64_t b = 0; b < state.capacity; ++b) {
    view.blocks[static_cast<size_t>(b)].block = b;
    view.blocks[static_cast<size_t>(b)].owner = state.owner(b);
  }
  for (size_t i = 0; i < view.log.size(); ++i) {
    const int64_t b = view.log[i].block;
    if (b >= 0 && b < state.capacity) view.blocks[static_cast<size_t>(b)].last_log = static_cast<int64_t>(i);
  }
  for (const PoolSequenceBooks& books : history.sequences) {
    const std::vector<int64_t> held = heldAt(books, moment);
    PoolSequenceTable table;
    table.sequence = books.sequence;
    table.rows = static_cast<int64_t>(held.size());
    const auto mapped = state.tables.find(books.sequence);
    if (mapped != state.tables.end()) {
      for (const auto& [logical, mapping] : mapped->second) {
        table.entries.push_back({logical, mapping.block, mapping.dangling});
        // A block's rows are its owner's: the entry that maps it and does not dangle.
        PoolBlock& block = view.blocks[static_cast<size_t>(mapping.block)];
        if (mapping.dangling || block.owner != books.sequence) continue;
        block.logical = logical;
        block.rows = rowsOf(books, held, logical, history.block_size);
      }
    }
    view.tables.push_back(std::move(table));
  }
  return view;
}

}  // namespace kvscope
