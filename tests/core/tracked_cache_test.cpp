// TrackedCache on its own, without a model: a "forward" here appends known
// K/V rows to the storage the way a model does (through storageForForward),
// so every logged operation, ledger birth and death can be checked exactly.
#include <gtest/gtest.h>

#include <torch/types.h>

#include "core/cache/tracked_cache.h"

namespace kvscope {
namespace {

constexpr int64_t kLayers = 2, kKvHeads = 1, kHeadDim = 4;

class TrackedCacheTest : public ::testing::Test {
 protected:
  explicit TrackedCacheTest(Fault fault = Fault::None, std::vector<int64_t> windows = {0, 0})
      : faults_(fault),
        cache_(CacheRole::Target,
               std::make_unique<KvCache>(kLayers, kKvHeads, kHeadDim, torch::TensorOptions().dtype(torch::kFloat32)),
               std::move(windows), faults_, ledger_, log_) {}

  // Feeds `stream` like Session::feed: plan, write every planned token's
  // rows (value = its position, so rows are recognisable), log.
  void feed(const std::vector<int64_t>& stream, int64_t round, Phase phase) {
    const PlannedWrite write = cache_.planWrite(phase, stream);
    const auto n = static_cast<int64_t>(write.tokens.size());
    std::vector<at::Tensor> computed;
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      const auto rows = torch::arange(write.start, write.start + n, torch::kFloat32)
                            .view({1, n, 1})
                            .expand({kKvHeads, n, kHeadDim})
                            .contiguous();  // [kv_heads, n, head_dim]
      cache_.storageForForward()->append(layer, rows, rows);
      computed.push_back(rows);
    }
    cache_.logWrite(write, round, computed, computed);
  }

  const CacheEvent& lastEvent() const { return log_.events().back(); }

  FaultPolicy faults_;
  KvLedger ledger_;
  CacheEventLog log_;
  TrackedCache cache_;
};

TEST_F(TrackedCacheTest, AppendLogsOneEventWithItsBirthsAndTheRequiredRows) {
  feed({10, 11, 12, 13}, 0, Phase::Prefill);
  ASSERT_EQ(log_.events().size(), 1u);
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.kind, CacheEventKind::Append);
  EXPECT_EQ(e.rows_before, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(e.rows_after, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(e.expected_rows, 4);
  EXPECT_EQ(e.written, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(ledger_.size(), 4);
  EXPECT_EQ(ledger_.entry(2).token, 12);
  EXPECT_EQ(ledger_.entry(2).position, 2);
  EXPECT_EQ(cache_.believedTokens(), (std::vector<int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(cache_.layout().layers[1], (std::vector<int64_t>{0, 1, 2, 3}));
  // Only the tokens not yet held are fed next time.
  feed({10, 11, 12, 13, 14, 15}, 1, Phase::Verify);
  EXPECT_EQ(lastEvent().written, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ledger_.entry(5).position, 5);
  EXPECT_EQ(cache_.requiredRows(), 6);
}

TEST_F(TrackedCacheTest, PruneCutsToTheRequiredRowsAndTheRejectedDraftsDie) {
  feed({10, 11, 12}, 0, Phase::Prefill);
  feed({10, 11, 12, 20, 21, 22}, 1, Phase::Verify);  // three drafts, one accepted
  cache_.prune(1, {/*keep=*/4, /*first_wrong_position=*/4, /*accepted=*/1, false});
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.kind, CacheEventKind::Crop);
  EXPECT_EQ(e.expected_rows, 4);
  EXPECT_EQ(e.rows_after, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(e.removed, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ledger_.entry(4).reason, DeathReason::RejectedDraft);
  EXPECT_EQ(ledger_.entry(4).died_round, 1);
  EXPECT_EQ(ledger_.entry(3).reason, DeathReason::Alive);
  EXPECT_EQ(cache_.believedTokens().size(), 4u);
  EXPECT_EQ(cache_.storage().length(0), 4);
}

TEST_F(TrackedCacheTest, NothingRequiredNothingLogged) {
  feed({10, 11, 12}, 0, Phase::Prefill);
  cache_.prune(1, {3, 3, 0, false});
  EXPECT_EQ(log_.events().size(), 1u);
}

class PruneShortTest : public TrackedCacheTest {
 protected:
  PruneShortTest() : TrackedCacheTest(Fault::PruneShort) {}
};

TEST_F(PruneShortTest, TheFaultKeepsOneRowTooManyAndTheEventSaysWhatWasRequired) {
  feed({10, 11, 12}, 0, Phase::Prefill);
  feed({10, 11, 12, 20, 21, 22}, 1, Phase::Verify);
  cache_.prune(1, {4, 4, 1, false});
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.expected_rows, 4);
  EXPECT_EQ(e.rows_after, (std::vector<int64_t>{5, 5}));
  EXPECT_FALSE(e.fault_action.empty());
  EXPECT_EQ(ledger_.entry(4).reason, DeathReason::Alive);  // the stale rejected draft
}

class SlidingWindowCacheTest : public TrackedCacheTest {
 protected:
  SlidingWindowCacheTest() : TrackedCacheTest(Fault::None, {3, 0}) {}
};

TEST_F(SlidingWindowCacheTest, OnlyTheWindowedLayerEvictsAndEntriesTheGlobalLayerKeepsStayAlive) {
  feed({10, 11, 12, 13, 14}, 0, Phase::Prefill);
  cache_.slideWindows({0, Phase::Prefill});
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.kind, CacheEventKind::Evict);
  EXPECT_EQ(e.layers, (std::vector<int64_t>{0}));
  // The next query is position 5: a window of 3 keys keeps 2 rows before it.
  EXPECT_EQ(e.rows_after, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(e.expected_first, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(cache_.layout().layers[0], (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ledger_.entry(0).reason, DeathReason::Alive);  // layer 1 still holds it
}

}  // namespace
}  // namespace kvscope
