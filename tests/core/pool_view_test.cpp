// The paged pool as the GUI draws it (core/snapshot/pool_view.h), read from a
// real batch of the bundled models with paged:4: every block's owner is the
// sequence whose table maps it, free blocks are the pool's, each block holds
// its owner's positions and tokens, the log is the pool's, a contiguous
// session has no pool, and an entry the free-mapped switch left mapped is
// marked dangling.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "core/cache/block_table.h"
#include "core/control/session_controller.h"
#include "core/decode/batch_session.h"
#include "core/model/bundled_models.h"
#include "core/snapshot/pool_view.h"
#include "session_test_support.h"

namespace kvscope {
// Its own namespace: the core tests build as a unity build, where other
// files' anonymous helpers (Pair, bundledPair) would collide.
namespace pool_view_test {
namespace {

using namespace testing_support;

struct Pair {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const Drafter> drafter;
};

Pair bundledPair() { return {bundledModel("target"), std::make_shared<ModelDrafter>(bundledModel("drafter"), "drafter")}; }

SessionOptions pagedOptions(int64_t block) {
  SessionOptions options;
  options.gamma = 4;
  options.max_new_tokens = 24;
  options.ignore_eos = true;
  options.record_attention = false;
  options.cache_layout = StorageLayout{true, block};
  return options;
}

std::vector<const Session*> sessionsOf(const BatchSession& batch) {
  std::vector<const Session*> out;
  for (size_t i = 0; i < batch.size(); ++i) out.push_back(&batch.sequence(i));
  return out;
}

std::vector<std::vector<int64_t>> threePrompts(const Pair& pair) {
  return randomPrompts(3, pair.target->config().vocab_size, 5, 13, 4242);
}

TEST(PoolView, OwnersFreeBlocksTablesAndRowsAreTheBatchs) {
  const Pair pair = bundledPair();
  BatchSession batch(pair.target, pair.drafter, threePrompts(pair), pagedOptions(4), {});
  for (int r = 0; r < 4; ++r) batch.stepRound();
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    SCOPED_TRACE(cacheRoleName(role));
    const std::optional<PoolView> view = poolViewOf(sessionsOf(batch), role);
    ASSERT_TRUE(view.has_value());
    const BlockPool& pool = *(role == CacheRole::Target ? batch.sequence(0).targetCache() : batch.sequence(0).drafterCache())
                                 ->blockTable()
                                 ->pool();
    EXPECT_EQ(view->block_size, 4);
    ASSERT_EQ(static_cast<int64_t>(view->blocks.size()), pool.capacity());
    EXPECT_EQ(view->freeBlocks(), pool.freeBlocks());
    ASSERT_EQ(view->tables.size(), 3u);
    for (size_t s = 0; s < batch.size(); ++s) {
      const Session& session = batch.sequence(s);
      const KvCache& cache = role == CacheRole::Target ? *session.targetCache() : *session.drafterCache();
      const PoolSequenceTable* table = view->table(static_cast<int64_t>(s));
      ASSERT_NE(table, nullptr);
      EXPECT_EQ(table->rows, cache.length(0));
      // A correct engine maps exactly the blocks its rows need and owns each one.
      EXPECT_EQ(static_cast<int64_t>(table->entries.size()), (cache.length(0) + 3) / 4) << "sequence " << s;
      EXPECT_EQ(view->blocksOwnedBy(static_cast<int64_t>(s)), static_cast<int64_t>(table->entries.size()));
      for (const PoolTableEntry& entry : table->entries) {
        EXPECT_FALSE(entry.dangling);
        EXPECT_EQ(entry.block, cache.blockTable()->blocks()[static_cast<size_t>(entry.logical)]);
        const PoolBlock& block = view->blocks[static_cast<size_t>(entry.block)];
        EXPECT_EQ(block.owner, static_cast<int64_t>(s));
        EXPECT_EQ(block.logical, entry.logical);
        // Its rows are the owner's positions logical*4 .. and the tokens its sequence has there.
        for (const PoolRow& row : block.rows) {
          EXPECT_EQ(row.position, entry.logical * 4 + row.offset);
          EXPECT_EQ(row.token, session.sequence()[static_cast<size_t>(row.position)]);
        }
        const int64_t held = std::min<int64_t>(4, cache.length(0) - entry.logical * 4);
        EXPECT_EQ(static_cast<int64_t>(block.rows.size()), held);
      }
      // The row -> block place agrees with the table.
      const auto place = view->placeOfRow(static_cast<int64_t>(s), cache.length(0) - 1);
      ASSERT_TRUE(place.has_value());
      EXPECT_EQ(place->block, table->entries.back().block);
      EXPECT_EQ(place->offset, (cache.length(0) - 1) % 4);
      EXPECT_FALSE(view->placeOfRow(static_cast<int64_t>(s), static_cast<int64_t>(table->entries.size()) * 4).has_value());
    }
    for (const PoolBlock& block : view->blocks) {
      EXPECT_EQ(block.owner, pool.owner(block.block));
      if (block.owner < 0) EXPECT_TRUE(block.rows.empty());
    }
    // The log is the pool's, and each block's last entry names it.
    ASSERT_EQ(view->log.size(), pool.log().size());
    for (size_t i = 0; i < view->log.size(); ++i) {
      EXPECT_EQ(view->log[i].operation, blockOperationName(pool.log()[i].operation));
      EXPECT_EQ(view->log[i].block, pool.log()[i].block);
      EXPECT_EQ(view->log[i].sequence, pool.log()[i].sequence);
    }
    for (const PoolBlock& block : view->blocks) {
      if (block.last_log >= 0) EXPECT_EQ(view->log[static_cast<size_t>(block.last_log)].block, block.block);
    }
  }
}

TEST(PoolView, RollbacksShowAsFreesInTheLog) {
  const Pair pair = bundledPair();
  BatchSession batch(pair.target, pair.drafter, threePrompts(pair), pagedOptions(1), {});
  for (int r = 0; r < 4; ++r) batch.stepRound();
  const std::optional<PoolView> view = poolViewOf(sessionsOf(batch), CacheRole::Target);
  ASSERT_TRUE(view.has_value());
  // Block size 1: every rejected draft's row is a block freed by its rollback.
  int64_t rejected = 0, frees = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    for (const RoundRecord& r : batch.sequence(s).rounds()) {
      if (r.index > 0) rejected += static_cast<int64_t>(r.drafts.size()) - r.accepted;
    }
  }
  for (const PoolLogEntry& e : view->log) frees += e.operation == "free" ? 1 : 0;
  ASSERT_EQ(view->dropped_log, 0);
  EXPECT_EQ(frees, rejected);
}

TEST(PoolView, AContiguousSessionHasNoPool) {
  const Pair pair = bundledPair();
  SessionOptions options = pagedOptions(4);
  options.cache_layout = StorageLayout{};
  BatchSession batch(pair.target, pair.drafter, threePrompts(pair), options, {});
  batch.stepRound();
  EXPECT_FALSE(poolViewOf(sessionsOf(batch), CacheRole::Target).has_value());
  EXPECT_FALSE(poolViewOf(sessionsOf(batch), CacheRole::Drafter).has_value());
}

TEST(PoolView, AnEntryFreedButStillMappedIsDangling) {
  const Pair pair = bundledPair();
  BatchSession batch(pair.target, pair.drafter, threePrompts(pair), pagedOptions(1), {});
  batch.stepPhase();  // the prefill
  // The free-mapped switch on sequence 1's target table: a rollback frees its
  // blocks past the kept rows and leaves them mapped.
  BlockTable& table = *batch.sequence(1).targetCache()->blockTable();
  table.setFreeMappedOnRollback(true);
  for (int r = 0; r < 3; ++r) batch.stepRound();
  const std::optional<PoolView> view = poolViewOf(sessionsOf(batch), CacheRole::Target);
  ASSERT_TRUE(view.has_value());
  const PoolSequenceTable* shown = view->table(1);
  ASSERT_NE(shown, nullptr);
  int64_t dangling = 0;
  for (const PoolTableEntry& entry : shown->entries) {
    dangling += entry.dangling ? 1 : 0;
    // A dangling entry's block no longer holds that logical block for the
    // sequence: it is free, another sequence's, or (handed out again, most
    // recently freed first) the same sequence's for a later logical block.
    if (entry.dangling) {
      const PoolBlock& block = view->blocks[static_cast<size_t>(entry.block)];
      EXPECT_TRUE(block.owner != 1 || block.logical != entry.logical) << "block " << entry.block;
    }
  }
  int64_t still_mapped = 0;
  for (const PoolLogEntry& e : view->log) still_mapped += e.sequence == 1 && e.still_mapped ? 1 : 0;
  ASSERT_GT(still_mapped, 0) << "no rollback freed a block of sequence 1: pick prompts that reject a draft";
  EXPECT_GT(dangling, 0);
  // The other sequences' tables stay clean.
  for (int64_t s : {0, 2}) {
    for (const PoolTableEntry& entry : view->table(s)->entries) EXPECT_FALSE(entry.dangling) << "sequence " << s;
  }
}

TEST(PoolView, TheControllerHandsThePoolsToSnapshots) {
  SessionController controller;
  controller.loadModels(ModelSpec{});
  SessionSpec spec;
  spec.prompt = "The cache";
  spec.more_prompts = {"A block table maps", "Speculative decoding drafts"};
  spec.options = pagedOptions(4);
  controller.startSession(spec);
  controller.stepRound();
  controller.stepRound();
  const auto snapshot = controller.snapshot();
  ASSERT_NE(snapshot->target_pool, nullptr);
  ASSERT_NE(snapshot->drafter_pool, nullptr);
  EXPECT_EQ(snapshot->target_pool->tables.size(), 3u);
  EXPECT_EQ(snapshot->target_pool->block_size, 4);
  spec.more_prompts.clear();
  spec.options.cache_layout = StorageLayout{};
  controller.startSession(spec);
  controller.stepRound();
  EXPECT_EQ(controller.snapshot()->target_pool, nullptr);
  EXPECT_FALSE(controller.poolView(CacheRole::Target).has_value());
}

}  // namespace
}  // namespace pool_view_test
}  // namespace kvscope
