// The paged pool at any moment of a run (core/snapshot/pool_history.h): a
// batch of three on the bundled pair with blocks of 2 rows, clean and under
// freed-block-reused, stepped one phase at a time. After every phase the
// live pool and tables are read as they stand (the pool's owners and size,
// each table's blocks and dangling flags, and the view poolViewOf builds from
// them); at the end, the pool's log replayed to each of those moments must
// give exactly that. Every log entry names the moment and the cache event of
// its sequence that made it, and at the root cause's moment of the faulty run
// the rolled-back sequence's freed block is drawn dangling.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "core/audit/root_cause.h"
#include "core/cache/block_table.h"
#include "core/decode/batch_session.h"
#include "core/model/bundled_models.h"
#include "core/snapshot/pool_history.h"
#include "core/snapshot/snapshot.h"
#include "session_test_support.h"

namespace kvscope {
// Its own namespace: the core tests build as a unity build.
namespace pool_history_test {
namespace {

using namespace testing_support;

constexpr int64_t kBlock = 2;

struct Pair {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const Drafter> drafter;
};

Pair bundledPair() { return {bundledModel("target"), std::make_shared<ModelDrafter>(bundledModel("drafter"), "drafter")}; }

SessionOptions pagedOptions(Fault fault) {
  SessionOptions options;
  options.gamma = 4;
  options.max_new_tokens = 20;
  options.ignore_eos = true;
  options.record_attention = false;
  options.cache_layout = StorageLayout{true, kBlock};
  options.fault = fault;
  return options;
}

std::vector<const Session*> sessionsOf(const BatchSession& batch) {
  std::vector<const Session*> out;
  for (size_t i = 0; i < batch.size(); ++i) out.push_back(&batch.sequence(i));
  return out;
}

const KvCache& cacheOf(const Session& session, CacheRole role) {
  return role == CacheRole::Target ? *session.targetCache() : *session.drafterCache();
}

// What the live pool and tables of one cache hold just after a phase ran.
struct LivePool {
  Moment moment;
  int64_t capacity = 0;
  std::vector<int64_t> owners;                      // per block, pool.owner()
  std::vector<std::vector<int64_t>> table_blocks;   // per sequence, its table's blocks()
  std::vector<std::vector<bool>> table_dangling;    // per sequence and entry, dangling()
  std::vector<int64_t> lengths;                     // per sequence, its cache's rows (layer 0)
  PoolView view;                                    // poolViewOf: the view built from the live pool
};

LivePool readLivePool(const BatchSession& batch, CacheRole role, const Moment& moment) {
  LivePool live;
  live.moment = moment;
  const BlockPool& pool = *cacheOf(batch.sequence(0), role).blockTable()->pool();
  live.capacity = pool.capacity();
  for (int64_t b = 0; b < pool.capacity(); ++b) live.owners.push_back(pool.owner(b));
  for (size_t s = 0; s < batch.size(); ++s) {
    const KvCache& cache = cacheOf(batch.sequence(s), role);
    const BlockTable& table = *cache.blockTable();
    live.table_blocks.push_back(table.blocks());
    std::vector<bool> dangling;
    for (size_t i = 0; i < table.blocks().size(); ++i) dangling.push_back(table.dangling(static_cast<int64_t>(i)));
    live.table_dangling.push_back(dangling);
    live.lengths.push_back(cache.length(0));
  }
  live.view = *poolViewOf(sessionsOf(batch), role);
  return live;
}

// Every field the GUI draws, the replayed view against the live one.
void expectSameView(const PoolView& replayed, const PoolView& live) {
  EXPECT_EQ(replayed.cache, live.cache);
  EXPECT_EQ(replayed.block_size, live.block_size);
  ASSERT_EQ(replayed.blocks.size(), live.blocks.size());
  for (size_t b = 0; b < live.blocks.size(); ++b) {
    SCOPED_TRACE("block " + std::to_string(b));
    const PoolBlock& r = replayed.blocks[b];
    const PoolBlock& l = live.blocks[b];
    EXPECT_EQ(r.block, l.block);
    EXPECT_EQ(r.owner, l.owner);
    EXPECT_EQ(r.logical, l.logical);
    EXPECT_EQ(r.last_log, l.last_log);
    ASSERT_EQ(r.rows.size(), l.rows.size());
    for (size_t i = 0; i < l.rows.size(); ++i) {
      EXPECT_EQ(r.rows[i].offset, l.rows[i].offset);
      EXPECT_EQ(r.rows[i].position, l.rows[i].position);
      EXPECT_EQ(r.rows[i].token, l.rows[i].token);
    }
  }
  ASSERT_EQ(replayed.tables.size(), live.tables.size());
  for (size_t t = 0; t < live.tables.size(); ++t) {
    SCOPED_TRACE("table of sequence " + std::to_string(live.tables[t].sequence));
    EXPECT_EQ(replayed.tables[t].sequence, live.tables[t].sequence);
    EXPECT_EQ(replayed.tables[t].rows, live.tables[t].rows);
    ASSERT_EQ(replayed.tables[t].entries.size(), live.tables[t].entries.size());
    for (size_t e = 0; e < live.tables[t].entries.size(); ++e) {
      EXPECT_EQ(replayed.tables[t].entries[e].logical, live.tables[t].entries[e].logical);
      EXPECT_EQ(replayed.tables[t].entries[e].block, live.tables[t].entries[e].block);
      EXPECT_EQ(replayed.tables[t].entries[e].dangling, live.tables[t].entries[e].dangling);
    }
  }
  ASSERT_EQ(replayed.log.size(), live.log.size());
  for (size_t i = 0; i < live.log.size(); ++i) {
    EXPECT_EQ(replayed.log[i].operation, live.log[i].operation);
    EXPECT_EQ(replayed.log[i].block, live.log[i].block);
    EXPECT_EQ(replayed.log[i].sequence, live.log[i].sequence);
    EXPECT_EQ(replayed.log[i].first_position, live.log[i].first_position);
    EXPECT_EQ(replayed.log[i].still_mapped, live.log[i].still_mapped);
  }
  EXPECT_EQ(replayed.dropped_log, live.dropped_log);
}

// The replayed view against the pool's and tables' own state.
void expectPoolState(const PoolView& replayed, const LivePool& live) {
  ASSERT_EQ(static_cast<int64_t>(replayed.blocks.size()), live.capacity);
  for (size_t b = 0; b < live.owners.size(); ++b) EXPECT_EQ(replayed.blocks[b].owner, live.owners[b]) << "block " << b;
  ASSERT_EQ(replayed.tables.size(), live.table_blocks.size());
  for (size_t s = 0; s < live.table_blocks.size(); ++s) {
    const PoolSequenceTable& table = replayed.tables[s];
    EXPECT_EQ(table.rows, live.lengths[s]) << "sequence " << s;
    ASSERT_EQ(table.entries.size(), live.table_blocks[s].size()) << "sequence " << s;
    for (size_t e = 0; e < table.entries.size(); ++e) {
      EXPECT_EQ(table.entries[e].logical, static_cast<int64_t>(e));
      EXPECT_EQ(table.entries[e].block, live.table_blocks[s][e]) << "sequence " << s << " entry " << e;
      EXPECT_EQ(table.entries[e].dangling, live.table_dangling[s][e]) << "sequence " << s << " entry " << e;
    }
  }
}

struct SteppedBatch {
  std::unique_ptr<BatchSession> batch;
  std::vector<LivePool> target, drafter;  // one per phase run, in order
};

SteppedBatch stepAndRecord(Fault fault) {
  const Pair pair = bundledPair();
  SteppedBatch run;
  run.batch = std::make_unique<BatchSession>(pair.target, pair.drafter,
                                             randomPrompts(3, pair.target->config().vocab_size, 5, 13, 4242),
                                             pagedOptions(fault), std::vector<int64_t>{});
  while (!run.batch->finished()) {
    const Moment moment{run.batch->currentRound(), run.batch->nextPhase()};
    run.batch->stepPhase();
    run.target.push_back(readLivePool(*run.batch, CacheRole::Target, moment));
    run.drafter.push_back(readLivePool(*run.batch, CacheRole::Drafter, moment));
  }
  return run;
}

std::string momentText(const Moment& m) { return "round " + std::to_string(m.round) + " " + phaseName(m.phase); }

// The replay of the final history to every recorded moment equals the live
// pool then; the replay to the end equals today's view of the live pool.
void expectEveryMomentReplays(const SteppedBatch& run) {
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    SCOPED_TRACE(cacheRoleName(role));
    const std::optional<PoolHistory> history = poolHistoryOf(sessionsOf(*run.batch), role);
    ASSERT_TRUE(history.has_value());
    ASSERT_EQ(history->dropped_log, 0);
    const std::vector<LivePool>& recorded = role == CacheRole::Target ? run.target : run.drafter;
    ASSERT_GT(recorded.size(), 8u);
    for (const LivePool& live : recorded) {
      SCOPED_TRACE(momentText(live.moment));
      const PoolView replayed = poolViewAt(*history, live.moment);
      ASSERT_TRUE(replayed.moment.has_value());
      EXPECT_FALSE(replayed.before_log);
      expectPoolState(replayed, live);
      expectSameView(replayed, live.view);
    }
    expectSameView(poolViewAt(*history, std::nullopt), *poolViewOf(sessionsOf(*run.batch), role));
    expectSameView(poolViewAt(*history, recorded.back().moment), *poolViewOf(sessionsOf(*run.batch), role));
  }
}

// Each log entry names the moment and the event of its sequence's log that
// made it: an event of that cache at that moment.
void expectEntriesNameTheirEvents(const BatchSession& batch) {
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    const BlockPool& pool = *cacheOf(batch.sequence(0), role).blockTable()->pool();
    ASSERT_FALSE(pool.log().empty());
    for (const BlockLogEntry& e : pool.log()) {
      ASSERT_TRUE(e.moment.stamped()) << blockOperationName(e.operation) << " of block " << e.block;
      const std::vector<CacheEvent>& events = batch.sequence(static_cast<size_t>(e.sequence)).events().events();
      ASSERT_GE(e.moment.event, 0);
      ASSERT_LT(e.moment.event, static_cast<int64_t>(events.size()));
      const CacheEvent& event = events[static_cast<size_t>(e.moment.event)];
      EXPECT_EQ(event.cache, role);
      EXPECT_EQ(event.round, e.moment.round);
      EXPECT_EQ(event.phase, e.moment.phase);
      // Blocks are mapped by writes and freed by rollbacks.
      const bool maps = e.operation == BlockOperation::Allocate || e.operation == BlockOperation::Reuse;
      EXPECT_EQ(maps, event.kind == CacheEventKind::Append || event.kind == CacheEventKind::Refeed)
          << blockOperationName(e.operation) << " in a " << cacheEventKindName(event.kind);
    }
  }
}

TEST(PoolHistory, EveryMomentOfACleanBatchReplaysToTheLivePool) {
  const SteppedBatch run = stepAndRecord(Fault::None);
  expectEveryMomentReplays(run);
  expectEntriesNameTheirEvents(*run.batch);
  // The pool changes over the run: a view of the end would be wrong earlier.
  const std::optional<PoolHistory> history = poolHistoryOf(sessionsOf(*run.batch), CacheRole::Target);
  const PoolView first = poolViewAt(*history, run.target.front().moment);
  const PoolView last = poolViewAt(*history, run.target.back().moment);
  EXPECT_LT(first.log.size(), last.log.size());
  int64_t frees = 0;
  for (const PoolLogEntry& e : last.log) frees += e.operation == "free" ? 1 : 0;
  EXPECT_GT(frees, 0) << "no rollback freed a block of 2 rows: pick prompts that reject drafts";
}

TEST(PoolHistory, EveryMomentOfAFreedBlockReusedBatchReplaysAndTheRootCauseDangles) {
  const SteppedBatch run = stepAndRecord(Fault::FreedBlockReused);
  expectEveryMomentReplays(run);
  expectEntriesNameTheirEvents(*run.batch);
  // The root cause (structure only: the block fault needs no recomputation),
  // the earliest over the batch's sequences.
  std::optional<RootCause> cause;
  for (size_t s = 0; s < run.batch->size(); ++s) {
    RootCauseOptions options;
    options.sequence = static_cast<int64_t>(s);
    const std::optional<RootCause> found = findRootCause(run.batch->sequence(s).record(), options);
    if (found && (!cause || !atOrBefore(Moment{cause->round, cause->phase}, Moment{found->round, found->phase}))) cause = found;
  }
  ASSERT_TRUE(cause.has_value());
  ASSERT_EQ(cause->kind, "block") << cause->what;
  ASSERT_FALSE(cause->dangling_blocks.empty());
  const std::optional<PoolHistory> history = poolHistoryOf(sessionsOf(*run.batch), CacheRole::Target);
  const Moment at{cause->round, cause->phase};
  const PoolView view = poolViewAt(*history, at);
  const PoolSequenceTable* table = view.table(cause->sequence);
  ASSERT_NE(table, nullptr);
  Moment before;
  ASSERT_TRUE(previousMoment(at, &before));
  const PoolView earlier = poolViewAt(*history, before);
  for (const DanglingBlock& d : cause->dangling_blocks) {
    const std::optional<PoolPlace> place = view.placeOfRow(cause->sequence, d.first_row);
    ASSERT_TRUE(place.has_value()) << "block " << d.block;
    EXPECT_EQ(place->block, d.block);
    EXPECT_TRUE(place->dangling) << "block " << d.block << " at " << momentText(at);
    // Just before the rollback the sequence owned it.
    const std::optional<PoolPlace> then = earlier.placeOfRow(cause->sequence, d.first_row);
    ASSERT_TRUE(then.has_value());
    EXPECT_EQ(then->block, d.block);
    EXPECT_FALSE(then->dangling);
    EXPECT_EQ(earlier.blocks[static_cast<size_t>(d.block)].owner, cause->sequence);
  }
  // The free that left it mapped is the root cause's own event.
  bool found_free = false;
  for (const PoolLogEntry& e : view.log) {
    if (e.operation != "free" || !e.still_mapped || e.sequence != cause->sequence) continue;
    if (e.moment.round != cause->round || e.moment.phase != cause->phase) continue;
    EXPECT_EQ(e.moment.event, cause->event_index);
    found_free = true;
  }
  EXPECT_TRUE(found_free);
}

TEST(PoolHistory, AReplayStartsFromWhatTheBoundedLogDropped) {
  // A pool whose log keeps 2 entries: the dropped ones are folded into its
  // start, so a replay of what it keeps still ends at the pool's state.
  const auto shared = std::make_shared<BlockPool>(BlockPoolShape{1, 1, 2, kBlock}, torch::TensorOptions().dtype(torch::kFloat32),
                                                 /*initial_blocks=*/1, /*log_capacity=*/2);
  const BlockPool& pool = *shared;
  BlockTable a(shared, 0);
  BlockTable b(shared, 1);
  const auto rows = [](int64_t n) { return torch::ones({1, n, 2}); };  // [kv_heads, n, head_dim]
  a.setMoment({0, Phase::Prefill, 0});
  a.write(0, 0, rows(5), rows(5));  // 3 blocks
  b.setMoment({0, Phase::Prefill, 0});
  b.write(0, 0, rows(3), rows(3));  // 2 blocks
  a.setMoment({1, Phase::Prune, 3});
  a.keepRows(2);  // frees 2
  b.setMoment({2, Phase::Verify, 4});
  b.write(0, 3, rows(3), rows(3));  // 1 more: reuses one
  // 3 + 2 allocations, 2 frees, 1 reuse: the first free is among the dropped.
  ASSERT_EQ(pool.droppedLogEntries(), 6);
  BlockPoolState state = pool.logStart();
  EXPECT_TRUE(state.last.stamped());
  for (const BlockLogEntry& e : pool.log()) state.apply(e);
  ASSERT_EQ(state.capacity, pool.capacity());
  for (int64_t block = 0; block < pool.capacity(); ++block) EXPECT_EQ(state.owner(block), pool.owner(block)) << block;
  for (const BlockTable* table : {&a, &b}) {
    const auto& mapped = state.tables[table->sequence()];
    ASSERT_EQ(mapped.size(), table->blocks().size());
    for (const auto& [logical, mapping] : mapped) EXPECT_EQ(mapping.block, table->blocks()[static_cast<size_t>(logical)]);
  }
  // A moment older than the dropped entries cannot be rebuilt: the view says so.
  PoolHistory history;
  history.block_size = kBlock;
  history.start = pool.logStart();
  history.log.assign(pool.log().begin(), pool.log().end());
  history.dropped_log = pool.droppedLogEntries();
  EXPECT_TRUE(poolViewAt(history, Moment{0, Phase::Prefill}).before_log);
  EXPECT_FALSE(poolViewAt(history, Moment{1, Phase::Prune}).before_log);
  EXPECT_FALSE(poolViewAt(history, Moment{2, Phase::Verify}).before_log);
  EXPECT_EQ(poolViewAt(history, Moment{2, Phase::Verify}).freeBlocks(), pool.freeBlocks());
}

}  // namespace
}  // namespace pool_history_test
}  // namespace kvscope
