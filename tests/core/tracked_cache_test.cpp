// TrackedCache on its own, without a model: a "forward" here hands the cache
// known K/V rows to write (TrackedCache::copyRows, the write a model's
// forward makes), so every logged operation, ledger birth and death can be
// checked exactly; an eviction policy's keep decision is taken by the cache
// and logged row for row.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include <torch/types.h>

#include "core/cache/tracked_cache.h"
#include "core/error.h"

namespace kvscope {
namespace {

constexpr int64_t kLayers = 2, kKvHeads = 1, kHeadDim = 4;

class TrackedCacheTest : public ::testing::Test {
 protected:
  explicit TrackedCacheTest(Fault fault = Fault::None, std::vector<int64_t> windows = {0, 0},
                            int64_t kv_heads = kKvHeads)
      : faults_(fault),
        cache_(CacheRole::Target,
               std::make_unique<KvCache>(kLayers, kv_heads, kHeadDim, torch::TensorOptions().dtype(torch::kFloat32)),
               std::move(windows), faults_, ledger_, log_) {}

  // Feeds `stream` as a forward would: the rows of the tokens the cache does
  // not hold yet (value = its position, so rows are recognisable), written
  // and logged by the cache.
  void feed(const std::vector<int64_t>& stream, int64_t round, Phase phase) {
    const auto start = static_cast<int64_t>(cache_.believedTokens().size());
    const auto n = static_cast<int64_t>(stream.size()) - start;
    std::vector<at::Tensor> computed;
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      computed.push_back(torch::arange(start, start + n, torch::kFloat32)
                             .view({1, n, 1})
                             .expand({cache_.storage().kvHeads(), n, kHeadDim})
                             .contiguous());  // [kv_heads, n, head_dim]
    }
    cache_.copyRows(phase, stream, round, computed, computed);
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

class PolicyEvictionCacheTest : public TrackedCacheTest {
 protected:
  PolicyEvictionCacheTest() : TrackedCacheTest(Fault::None, {0, 0}, /*kv_heads=*/2) {}

  // Every (entry, layer, kv head) a decision drops. One prefill from
  // position 0 wrote the rows, so row r of every layer holds entry r.
  static std::set<std::tuple<int64_t, int64_t, int64_t>> dropped(const EvictionDecision& decision) {
    std::set<std::tuple<int64_t, int64_t, int64_t>> out;
    for (int64_t l = 0; l < static_cast<int64_t>(decision.keep.size()); ++l) {
      const auto& keep = decision.keep[l];  // [kv, T]
      for (int64_t h = 0; h < keep.size(0); ++h) {
        for (int64_t r = 0; r < keep.size(1); ++r) {
          if (!keep[h][r].item<bool>()) out.insert({r, l, h});
        }
      }
    }
    return out;
  }
};

TEST_F(PolicyEvictionCacheTest, APolicysKeepDecisionTakenByTheCacheLogsExactlyTheRowsItMasked) {
  feed({10, 11, 12, 13, 14, 15}, 0, Phase::Prefill);
  EvictionSettings settings;
  settings.policy = EvictionPolicy::Random;  // differs per layer and kv head
  settings.seed = 7;
  settings.budget.rows = 3;
  const EvictionDecision decision = decideEviction(cache_.storage(), settings, {}, {3, 3});
  const auto expected = dropped(decision);
  ASSERT_EQ(expected.size(), 2u * 2u * 3u);
  const std::vector<RemovedRow> removed = cache_.evict({0, Phase::Prefill}, "random", decision);

  ASSERT_EQ(log_.events().size(), 2u);  // the write, then the eviction
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.kind, CacheEventKind::Evict);
  EXPECT_EQ(e.policy, "random");
  EXPECT_EQ(e.rows_after, e.rows_before);  // masked rows stay where they are
  std::set<std::tuple<int64_t, int64_t, int64_t>> logged;
  for (const MaskedRow& m : e.masked) {
    EXPECT_TRUE(logged.insert({m.entry, m.layer, m.kv_head}).second) << "masked twice";
    EXPECT_DOUBLE_EQ(m.score, decision.scores[m.layer][m.kv_head][m.entry].item<double>());
  }
  EXPECT_EQ(logged, expected);
  EXPECT_EQ(removed.size(), expected.size());
  for (int64_t l = 0; l < kLayers; ++l) EXPECT_TRUE(torch::equal(cache_.storage().keepMask(l), decision.keep[l])) << l;
  // An entry dies when no kv head of any layer reads it any more.
  for (int64_t entry = 0; entry < 6; ++entry) {
    bool read = false;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t h = 0; h < 2; ++h) read = read || expected.count({entry, l, h}) == 0;
    }
    const bool listed = std::find(e.removed.begin(), e.removed.end(), entry) != e.removed.end();
    EXPECT_EQ(listed, !read) << entry;
    EXPECT_EQ(ledger_.entry(entry).reason, read ? DeathReason::Alive : DeathReason::Eviction) << entry;
  }
  EXPECT_EQ(cache_.masks().size(), static_cast<int64_t>(expected.size()));
  // The same decision again drops no row still read: nothing happens, nothing is logged.
  EXPECT_TRUE(cache_.evict({1, Phase::Prune}, "random", decision).empty());
  EXPECT_EQ(log_.events().size(), 2u);
}

TEST_F(PolicyEvictionCacheTest, AnEntryDiesOnlyWhenEveryHeadOfEveryLayerStopsReadingIt) {
  feed({10, 11, 12, 13}, 0, Phase::Prefill);
  EvictionDecision decision;
  for (int64_t l = 0; l < kLayers; ++l) {
    auto keep = torch::ones({2, 4}, torch::kBool);  // [kv, T]
    keep.select(1, 2).fill_(false);                 // entry 2: dropped everywhere
    if (l == 1) keep[1][3] = false;                 // entry 3: by one head of one layer only
    decision.keep.push_back(keep);
    decision.scores.push_back(torch::zeros({2, 4}, torch::kFloat32));
  }
  cache_.evict({0, Phase::Prefill}, "hand-made", decision);
  const CacheEvent& e = lastEvent();
  EXPECT_EQ(e.masked.size(), 2u * 2u + 1u);
  EXPECT_EQ(e.removed, (std::vector<int64_t>{2}));
  EXPECT_EQ(ledger_.entry(2).reason, DeathReason::Eviction);
  EXPECT_EQ(ledger_.entry(3).reason, DeathReason::Alive);
  EXPECT_TRUE(cache_.masks().masked(3, 1, 1));
  EXPECT_FALSE(cache_.masks().masked(3, 1, 0));
  // A decision with a layer missing is refused before anything changes.
  EvictionDecision short_decision = decision;
  short_decision.keep.pop_back();
  EXPECT_THROW(cache_.evict({1, Phase::Prune}, "hand-made", short_decision), Error);
  EXPECT_EQ(log_.events().size(), 2u);
}

}  // namespace
}  // namespace kvscope
