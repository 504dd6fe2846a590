// The eviction scorers, the shared selection, PyramidKV's budgets and element
// pruning (core/cache/eviction_*.h, row_selection.h, element_pruning.h) on
// small hand-computed cases where the kept set is known. Attention weights
// are dyadic fractions, so every sum is exact in float32 and ties are real ties.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <numeric>
#include <string>
#include <vector>

#include "core/cache/element_pruning.h"
#include "core/cache/eviction_policy.h"
#include "core/cache/eviction_scores.h"
#include "core/cache/row_demotion.h"
#include "core/cache/row_selection.h"
#include "core/error.h"

namespace kvscope {
namespace {

// The kept rows of one kv head, in order.
std::vector<int64_t> keptRows(const at::Tensor& keep, int64_t head = 0) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < keep.size(1); ++r) {
    if (keep[head][r].item<bool>()) rows.push_back(r);
  }
  return rows;
}

at::Tensor matrix(const std::vector<std::vector<float>>& rows) {
  std::vector<at::Tensor> out;
  for (const auto& row : rows) out.push_back(torch::tensor(row, torch::kFloat32));
  return torch::stack(out);
}

// One query head, 5 causal queries over 5 rows. Received attention summed over
// the queries: row 0 2.375, row 1 1.0, row 2 1.0, row 3 0.375, row 4 0.25.
at::Tensor h2oPattern() {
  return matrix({{1, 0, 0, 0, 0},
                 {.5, .5, 0, 0, 0},
                 {.25, .25, .5, 0, 0},
                 {.5, .125, .125, .25, 0},
                 {.125, .125, .375, .125, .25}})
      .unsqueeze(0);  // [1 head, 5 queries, 5 rows]
}

EvictionSettings settingsFor(EvictionPolicy policy) {
  EvictionSettings s;
  s.policy = policy;
  return s;
}

LayerEviction choose(EvictionPolicy policy, const at::Tensor& attention, const at::Tensor& keys, int64_t keep,
                     int64_t window = -1, int64_t kernel = 5) {
  EvictionSettings s = settingsFor(policy);
  s.window = window;
  s.kernel = kernel;
  return chooseRows(s, LayerEvidence{0, keys, attention}, keep);
}

at::Tensor noKeys(int64_t kv_heads, int64_t rows) { return torch::zeros({kv_heads, rows, 2}); }

TEST(EvictionScores, GroupMeanAveragesTheQueryHeadsOfEachKvHead) {
  // 4 query heads over 2 kv heads: heads 0, 1 read kv head 0; heads 2, 3 kv head 1.
  auto weights = torch::tensor({1.f, .5f, .25f, .75f}).view({4, 1, 1});  // [heads, n, T]
  auto grouped = groupMeanWeights(weights, 2);                            // [kv, n, T]
  EXPECT_FLOAT_EQ(grouped[0][0][0].item<float>(), .75f);
  EXPECT_FLOAT_EQ(grouped[1][0][0].item<float>(), .5f);
  EXPECT_THROW(groupMeanWeights(weights, 3), Error);
}

TEST(EvictionScores, H2oSumsTheAttentionEveryRowReceived) {
  auto scores = h2oScores(h2oPattern(), 1);  // [1, 5]
  EXPECT_TRUE(torch::equal(scores, torch::tensor({2.375f, 1.f, 1.f, .375f, .25f}).unsqueeze(0)));
}

TEST(EvictionScores, H2oKeepsHalfTheBudgetRecentAndBreaksTiesByTheEarlierRow) {
  // Budget 3: window 3 / 2 = 1 keeps row 4; then row 0 (2.375); rows 1 and 2
  // tie at 1.0 and the earlier one is kept.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::H2O, h2oPattern(), noKeys(1, 5), 3).keep), (std::vector<int64_t>{0, 1, 4}));
  // An explicit window of 2 keeps rows 3 and 4, then row 0.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::H2O, h2oPattern(), noKeys(1, 5), 3, 2).keep),
            (std::vector<int64_t>{0, 3, 4}));
}

TEST(EvictionScores, H2oAveragesQueryHeadsBeforeRanking) {
  // The two query heads disagree on row 1; the kv head ranks by their mean.
  auto head0 = matrix({{1, 0, 0}, {.75, .25, 0}, {.5, .25, .25}});
  auto head1 = matrix({{1, 0, 0}, {0, 1, 0}, {0, .75, .25}});
  auto weights = torch::stack({head0, head1});  // [2 heads, 3, 3] over one kv head
  // Sums: head 0 (2.25, .5, .25), head 1 (1, 1.75, .25); mean (1.625, 1.125, .25).
  auto scores = h2oScores(weights, 1);
  EXPECT_TRUE(torch::equal(scores, torch::tensor({1.625f, 1.125f, .25f}).unsqueeze(0)));
  // Budget 2 with a window of 1: row 2 and row 0.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::H2O, weights, noKeys(1, 3), 2, 1).keep), (std::vector<int64_t>{0, 2}));
}

TEST(EvictionScores, MaxPoolSameHasStrideOneAndInfinitePadding) {
  auto x = torch::tensor({1.f, 3.f, 2.f, 0.f, 0.f, 5.f}).unsqueeze(0);
  EXPECT_TRUE(torch::equal(maxPoolSame(x, 3), torch::tensor({3.f, 3.f, 3.f, 2.f, 5.f, 5.f}).unsqueeze(0)));
  EXPECT_TRUE(torch::equal(maxPoolSame(x, 5), torch::tensor({3.f, 3.f, 3.f, 5.f, 5.f, 5.f}).unsqueeze(0)));
  EXPECT_TRUE(torch::equal(maxPoolSame(x, 1), x));
  EXPECT_THROW(maxPoolSame(x, 4), Error);
}

// 6 rows; the last 2 queries weigh rows (.5, 0, 0, .25, 1, .25) in sum.
at::Tensor snapkvPattern() {
  return matrix({{1, 0, 0, 0, 0, 0},
                 {.5, .5, 0, 0, 0, 0},
                 {.5, .25, .25, 0, 0, 0},
                 {.25, .25, .25, .25, 0, 0},
                 {.5, 0, 0, 0, .5, 0},
                 {0, 0, 0, .25, .5, .25}})
      .unsqueeze(0);  // [1, 6, 6]
}

TEST(EvictionScores, SnapkvPoolsTheWindowsAttentionBeforeTheWindow) {
  // Window 2: summed (.5, 0, 0, .25 | 1, .25); kernel 3 pools the first four
  // to (.5, .5, .25, .25); the window rows keep their sums.
  auto scores = snapkvScores(snapkvPattern(), 1, 2, 3);
  EXPECT_TRUE(torch::equal(scores, torch::tensor({.5f, .5f, .25f, .25f, 1.f, .25f}).unsqueeze(0)));
  EXPECT_THROW(snapkvScores(snapkvPattern(), 1, 7, 3), Error);
}

TEST(EvictionScores, SnapkvKeepsTheWindowAndThePooledBest) {
  // Budget 4, window 2: rows 4, 5, then two of rows 0..3. Pooled, row 1 (raw
  // 0) ties row 0 and beats row 3 (raw .25); unpooled (kernel 1) row 3 wins.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), 4, 2, 3).keep),
            (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(keptRows(choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), 4, 2, 1).keep),
            (std::vector<int64_t>{0, 3, 4, 5}));
  // Budget 3: one pooled row; rows 0 and 1 tie at .5, the earlier is kept.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), 3, 2, 3).keep),
            (std::vector<int64_t>{0, 4, 5}));
  // The default window (16) is cut to the 6 queries there are: a budget of 3
  // keeps the 3 most recent rows. A window the user asked for is not cut.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), 3).keep),
            (std::vector<int64_t>{3, 4, 5}));
  try {
    choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), 3, 7);
    ADD_FAILURE() << "a window of 7 over 6 queries was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--window must be in [1, 6]"), std::string::npos) << e.what();
  }
}

TEST(EvictionScores, SnapkvAveragesQueryHeadsAndPyramidUsesItsScores) {
  // Two query heads on one kv head: the second sees the pattern with the last
  // query moved from row 3 to row 1, so the window sums average to
  // (.5, .125, 0, .125 | 1, .25); kernel 1 keeps row 1 and row 3 tied at .125,
  // the earlier one wins.
  const auto first = snapkvPattern()[0];
  auto second = first.clone();
  second[5] = torch::tensor({0.f, .25f, 0.f, 0.f, .5f, .25f});
  const auto weights = torch::stack({first, second});  // [2 heads, 6, 6]
  EXPECT_TRUE(torch::equal(snapkvScores(weights, 1, 2, 1),
                           torch::tensor({.5f, .125f, 0.f, .125f, 1.f, .25f}).unsqueeze(0)));
  EXPECT_EQ(keptRows(choose(EvictionPolicy::SnapKV, weights, noKeys(1, 6), 4, 2, 1).keep),
            (std::vector<int64_t>{0, 1, 4, 5}));
  // Pyramid ranks a layer exactly as snapkv does; only its budgets differ.
  for (int64_t keep : {2, 3, 4, 5}) {
    EXPECT_TRUE(torch::equal(choose(EvictionPolicy::Pyramid, snapkvPattern(), noKeys(1, 6), keep, 2, 3).keep,
                             choose(EvictionPolicy::SnapKV, snapkvPattern(), noKeys(1, 6), keep, 2, 3).keep))
        << keep;
  }
}

TEST(EvictionScores, TovaRanksByTheLastQueryAveragedOverItsHeads) {
  auto head0 = matrix({{1, 0, 0, 0}, {.5, .5, 0, 0}, {.25, .25, .5, 0}, {.5, .25, .125, .125}});
  auto head1 = matrix({{1, 0, 0, 0}, {.5, .5, 0, 0}, {.25, .25, .5, 0}, {.25, .25, .25, .25}});
  auto weights = torch::stack({head0, head1});  // [2 heads, 4, 4]: last query mean (.375, .25, .1875, .1875)
  EXPECT_TRUE(torch::equal(tovaScores(weights, 1), torch::tensor({.375f, .25f, .1875f, .1875f}).unsqueeze(0)));
  EXPECT_EQ(keptRows(choose(EvictionPolicy::Tova, weights, noKeys(1, 4), 2).keep), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(keptRows(choose(EvictionPolicy::Tova, weights, noKeys(1, 4), 3).keep), (std::vector<int64_t>{0, 1, 2}));
  // A decode step removes the lowest kept row; of the tied rows 2 and 3 the later one goes.
  auto all = torch::ones({1, 4}, torch::kBool);
  EXPECT_EQ(lowestKept(tovaScores(weights, 1), all), (std::vector<int64_t>{3}));
  all[0][3] = false;
  EXPECT_EQ(lowestKept(tovaScores(weights, 1), all), (std::vector<int64_t>{2}));
}

TEST(EvictionScores, KnormKeepsTheLowestKeyNorms) {
  // Norms 5, 1, 2, 1 in kv head 0; kv head 1 reversed.
  auto head = torch::tensor({3.f, 4.f, 1.f, 0.f, 0.f, 2.f, 0.f, 1.f}).view({4, 2});
  auto keys = torch::stack({head, head.flip(0)});  // [2, 4, 2]
  auto knorm = [&](int64_t keep) { return choose(EvictionPolicy::Knorm, at::Tensor(), keys, keep).keep; };
  EXPECT_EQ(keptRows(knorm(2), 0), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(keptRows(knorm(1), 0), (std::vector<int64_t>{1}));  // 1 and 3 tie: the earlier
  EXPECT_EQ(keptRows(knorm(3), 0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(keptRows(knorm(2), 1), (std::vector<int64_t>{0, 2}));  // norms 1, 2, 1, 5
}

TEST(EvictionScores, StreamingKeepsSinksAndTheMostRecentRows) {
  EvictionSettings s = settingsFor(EvictionPolicy::Streaming);
  s.sinks = 2;
  EXPECT_EQ(keptRows(chooseRows(s, LayerEvidence{0, noKeys(2, 10), {}}, 5).keep, 1),
            (std::vector<int64_t>{0, 1, 7, 8, 9}));
  // The default 4 sinks under a budget of 3: the sinks alone, cut to the budget.
  EXPECT_EQ(keptRows(choose(EvictionPolicy::Streaming, at::Tensor(), noKeys(1, 10), 3).keep),
            (std::vector<int64_t>{0, 1, 2}));
}

TEST(EvictionScores, RandomIsSeededAndKeepsTheBudget) {
  EXPECT_TRUE(torch::equal(randomScores(2, 50, 7, 1), randomScores(2, 50, 7, 1)));
  EXPECT_FALSE(torch::equal(randomScores(2, 50, 7, 1), randomScores(2, 50, 8, 1)));
  EXPECT_FALSE(torch::equal(randomScores(2, 50, 7, 1), randomScores(2, 50, 7, 2)));
  EvictionSettings s = settingsFor(EvictionPolicy::Random);
  s.seed = 3;
  const auto keep = chooseRows(s, LayerEvidence{0, noKeys(2, 50), {}}, 20).keep;
  EXPECT_EQ(keep.sum(1)[0].item<int64_t>(), 20);
  EXPECT_EQ(keep.sum(1)[1].item<int64_t>(), 20);
  EXPECT_FALSE(torch::equal(keep[0], keep[1]));  // each kv head draws its own
}

TEST(RowSelection, ProtectedRowsAreCutBackToTheBudget) {
  auto scores = torch::tensor({5.f, 4.f, 3.f, 2.f, 1.f, 0.f}).unsqueeze(0);
  EXPECT_EQ(keptRows(keepBest(scores, {3, 0, 0})), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(keptRows(keepBest(scores, {3, 0, 2})), (std::vector<int64_t>{0, 4, 5}));
  EXPECT_EQ(keptRows(keepBest(scores, {3, 1, 5})), (std::vector<int64_t>{0, 4, 5}));
  EXPECT_EQ(keptRows(keepBest(scores, {9, 0, 0})).size(), 6u);
  EXPECT_EQ(keptRows(keepBest(scores, {0, 2, 2})).size(), 0u);
}

TEST(PyramidBudgets, DecreaseLinearlyWithTheSameMean) {
  // Mean 10 over 5 layers: spread limited to 1 - 1/10 so the last layer keeps
  // a row: exact 19, 14.5, 10, 5.5, 1; the half rows go to the earlier layer.
  const auto budgets = pyramidBudgets(10, 5, 100);
  EXPECT_EQ(budgets, (std::vector<int64_t>{19, 15, 10, 5, 1}));
  // Capped by the layer length: mean 8 of 10 rows allows a spread of 0.25.
  EXPECT_EQ(pyramidBudgets(8, 3, 10), (std::vector<int64_t>{10, 8, 6}));
  EXPECT_EQ(pyramidBudgets(7, 1, 10), (std::vector<int64_t>{7}));
  for (int64_t mean : {1, 5, 13, 30}) {
    const auto b = pyramidBudgets(mean, 6, 40);
    EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), 6 * mean) << mean;
    for (size_t l = 1; l < b.size(); ++l) EXPECT_LE(b[l], b[l - 1]) << mean;
    for (int64_t x : b) EXPECT_LE(x, 40);
  }
}

TEST(PyramidBudgets, LayerBudgetsUseTheSettingsBudget) {
  EvictionSettings s = settingsFor(EvictionPolicy::Pyramid);
  s.budget.fraction = 0.5;
  EXPECT_EQ(layerBudgets(s, 5, 20), pyramidBudgets(10, 5, 20));
  s.policy = EvictionPolicy::H2O;
  EXPECT_EQ(layerBudgets(s, 3, 20), (std::vector<int64_t>{10, 10, 10}));
  s.budget.rows = 7;
  EXPECT_EQ(layerBudgets(s, 2, 20), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(layerBudgets(s, 2, 5), (std::vector<int64_t>{5, 5}));
}

TEST(EvictionSettings, BadValuesNameTheOptionAndItsRange) {
  auto message = [](EvictionSettings s) {
    try {
      s.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EvictionSettings s;
  s.budget.fraction = 1.5;
  EXPECT_NE(message(s).find("--budget must be a fraction of the rows in (0, 1]"), std::string::npos);
  s = EvictionSettings{};
  s.kernel = 4;
  EXPECT_NE(message(s).find("--kernel must be odd"), std::string::npos);
  s = EvictionSettings{};
  s.window = 0;
  EXPECT_NE(message(s).find("--window"), std::string::npos);
  s = EvictionSettings{};
  s.policy = EvictionPolicy::Tova;
  s.demote_bits = 8;
  EXPECT_NE(message(s).find("--demote does not combine with --policy tova"), std::string::npos);
  s.policy = EvictionPolicy::H2O;
  EXPECT_EQ(message(s), "");
  EXPECT_THROW(parseEvictionPolicy("lru"), Error);
  EXPECT_EQ(parseEvictionPolicy("snapkv"), EvictionPolicy::SnapKV);
}

TEST(ElementPruning, KeptEntriesRoundTheSparsity) {
  EXPECT_EQ(keptEntries(8, 0.5), 4);
  EXPECT_EQ(keptEntries(8, 0.7), 2);  // 5.6 pruned rounds to 6
  EXPECT_EQ(keptEntries(10, 0), 10);
}

// [1 kv head, 3 rows, 4 channels]; row 2 is in a dense window of 1.
at::Tensor elementScores() {
  return matrix({{4, 1, 3, 2}, {1, 5, 1, 2}, {0, 0, 0, 0}}).unsqueeze(0);
}

TEST(ElementPruning, PerTokenKeepsTheTopChannelsOfEachRow) {
  const auto keep = elementKeepMask(elementScores(), PruneAxis::PerToken, 0.5, 1);
  EXPECT_TRUE(torch::equal(keep[0], matrix({{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 1, 1}}).to(torch::kBool)));
}

TEST(ElementPruning, PerChannelKeepsTheTopRowsOfEachChannel) {
  // Rows 0 and 1 are pruned, one entry kept per channel; channel 3 ties (2, 2): row 0.
  const auto keep = elementKeepMask(elementScores(), PruneAxis::PerChannel, 0.5, 1);
  EXPECT_TRUE(torch::equal(keep[0], matrix({{1, 0, 1, 1}, {0, 1, 0, 0}, {1, 1, 1, 1}}).to(torch::kBool)));
}

TEST(ElementPruning, RowsAnEvictionRemovedAreNeitherCountedNorRanked) {
  // [1 kv head, 4 rows, 2 channels], no dense window; row 1 was evicted (its
  // high scores would win every channel if it were ranked).
  const auto scores = matrix({{1, 5}, {9, 9}, {3, 1}, {2, 4}}).unsqueeze(0);
  auto present = torch::ones({1, 4}, torch::kBool);
  present[0][1] = false;
  // Per channel: 3 rows present, keptEntries(3, 0.5) = 1 each: row 2 in
  // channel 0 (3 > 2 > 1), row 0 in channel 1 (5 > 4 > 1); row 1 untouched.
  EXPECT_TRUE(torch::equal(elementKeepMask(scores, PruneAxis::PerChannel, 0.5, 0, present)[0],
                           matrix({{0, 1}, {1, 1}, {1, 0}, {0, 0}}).to(torch::kBool)));
  // Per token: each present row keeps its best channel; row 1 untouched.
  EXPECT_TRUE(torch::equal(elementKeepMask(scores, PruneAxis::PerToken, 0.5, 0, present)[0],
                           matrix({{0, 1}, {1, 1}, {1, 0}, {0, 1}}).to(torch::kBool)));
  // Every row present, one entry per channel (keptEntries(4, 0.75) = 1): row 1 takes both.
  EXPECT_TRUE(torch::equal(elementKeepMask(scores, PruneAxis::PerChannel, 0.75, 0)[0],
                           matrix({{0, 0}, {1, 1}, {0, 0}, {0, 0}}).to(torch::kBool)));
}

TEST(ElementPruning, KeepsExactlyTheRequestedCountAndLeavesTheDenseWindow) {
  torch::manual_seed(5);
  const auto scores = torch::rand({2, 50, 8});
  const auto per_token = elementKeepMask(scores, PruneAxis::PerToken, 0.7, 10);
  EXPECT_TRUE(torch::equal(per_token.narrow(1, 0, 40).sum(2), torch::full({2, 40}, 2, torch::kLong)));
  EXPECT_TRUE(per_token.narrow(1, 40, 10).all().item<bool>());
  const auto per_channel = elementKeepMask(scores, PruneAxis::PerChannel, 0.7, 10);
  EXPECT_TRUE(torch::equal(per_channel.narrow(1, 0, 40).sum(1), torch::full({2, 8}, keptEntries(40, 0.7), torch::kLong)));
  EXPECT_TRUE(per_channel.narrow(1, 40, 10).all().item<bool>());
  // A dense window as long as the cache prunes nothing.
  EXPECT_TRUE(elementKeepMask(scores, PruneAxis::PerToken, 0.7, 50).all().item<bool>());
}

TEST(ElementPruning, OutputAwareScoresWeighByQueriesAndAttention) {
  auto keys = matrix({{1, -2}, {3, 1}}).unsqueeze(0);  // [1, 2 rows, 2]
  // Two query heads on kv head 0: mean |q| per channel (1, 1) and (2, 0) -> (1.5, .5).
  auto queries = torch::stack({matrix({{1, 0}, {-1, 2}}), matrix({{2, 0}, {-2, 0}})});  // [2, 2, 2]
  EXPECT_TRUE(torch::equal(keyElementScores(keys, queries, ElementScore::OutputAware)[0],
                           matrix({{1.5, 1}, {4.5, .5}})));
  EXPECT_TRUE(torch::equal(keyElementScores(keys, queries, ElementScore::Magnitude)[0], matrix({{1, 2}, {3, 1}})));
  auto row_weights = torch::tensor({.25f, .75f}).unsqueeze(0);  // [1, 2]
  EXPECT_TRUE(torch::equal(valueElementScores(keys, row_weights, ElementScore::OutputAware)[0],
                           matrix({{.25, .5}, {2.25, .75}})));
  EXPECT_THROW(keyElementScores(keys, at::Tensor(), ElementScore::OutputAware), Error);
}

TEST(RowDemotion, QuantisesEachRowWithItsOwnScale) {
  // Rows whose largest entry is the top level give a scale of exactly 1, so
  // the rounding is visible: 4 bits (top 7), -3.5 and 1.75 round half to even.
  auto x = torch::tensor({7.f, -3.5f, 1.75f, 0.f, 0.f, 0.f, 0.f, 0.f}).view({1, 2, 4});  // [1, 2 rows, 4]
  const auto four = quantizeRows(x, 4);
  EXPECT_TRUE(torch::equal(four[0][0], torch::tensor({7.f, -4.f, 2.f, 0.f})));
  EXPECT_TRUE(torch::equal(four[0][1], torch::zeros({4})));  // an all-zero row stays zero
  // 8 bits (top 127): -63.5 -> -64, 31.75 -> 32; a second row with its own scale 2.
  auto y8 = torch::tensor({127.f, -63.5f, 31.75f, 0.f, 254.f, 3.f, -1.f, 0.f}).view({1, 2, 4});
  const auto eight = quantizeRows(y8, 8);
  EXPECT_TRUE(torch::equal(eight[0][0], torch::tensor({127.f, -64.f, 32.f, 0.f})));
  EXPECT_TRUE(torch::equal(eight[0][1], torch::tensor({254.f, 4.f, -0.f, 0.f})));  // 1.5 -> 2, -0.5 -> -0
  // Every error is at most half a step of its row's scale.
  torch::manual_seed(2);
  const auto y = torch::randn({2, 30, 16});
  const auto step = y.abs().amax(-1, true) / 7;
  EXPECT_TRUE(((quantizeRows(y, 4) - y).abs() <= step / 2 + 1e-6).all().item<bool>());
  EXPECT_THROW(quantizeRows(y, 3), Error);
  EXPECT_EQ(demotedRowBytes(10, 16, 4), 10 * (8 + 4));
}

}  // namespace
}  // namespace kvscope
