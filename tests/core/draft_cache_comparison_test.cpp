// The two caches of compressed-cache self-speculation side by side
// (core/compress/draft_cache_comparison.h, SelfSpeculationOptions::record):
// row p of both is sequence position p whatever layout the drafting copy
// uses; the copy holds exactly the rows the policy kept plus every row it
// wrote itself; rows both caches got from the shared prefill are identical,
// and so are layer 0's later rows (a token and its position decide them),
// while deeper layers' later rows differ under a small budget (their hidden
// states attended to the compressed context); the round log adds up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/compress/self_speculation.h"
#include "core/error.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

constexpr int64_t kPrompt = 40;
constexpr int64_t kNew = 16;

SelfSpeculationResult recorded(const CausalLM& model, const CompressionSpec& spec, DraftCacheLayout layout) {
  SelfSpeculationOptions options;
  options.gamma = 3;
  options.max_new = kNew;
  options.layout = layout;
  options.record = true;
  const auto prompt = randomPrompts(1, model.config().vocab_size, kPrompt, kPrompt, 21)[0];
  return runSelfSpeculation(model, prompt, spec, options);
}

TEST(DraftCacheComparison, HoldsTheKeptPrefillRowsAndEveryRowWrittenSince) {
  const auto model = fixtureModel("llama-tiny");
  const auto r = recorded(*model, CompressionSpec::evicting(EvictionPolicy::H2O, 0.25), DraftCacheLayout::Compacted);
  const DraftCacheComparison& c = r.caches;
  ASSERT_EQ(c.layers, model->config().num_layers);
  EXPECT_EQ(c.positions, kPrompt + kNew - 1);  // every token but the last
  EXPECT_EQ(c.compressed_rows, kPrompt - 1);
  const int64_t budget = EvictionBudget{0.25}.rowsOf(kPrompt - 1);
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      int64_t kept_prefill = 0;
      for (int64_t p = 0; p < c.positions; ++p) {
        if (p < c.compressed_rows) kept_prefill += c.holds(l, h, p) ? 1 : 0;
        else EXPECT_TRUE(c.holds(l, h, p)) << "layer " << l << " head " << h << " position " << p;
      }
      EXPECT_EQ(kept_prefill, budget) << "layer " << l << " head " << h;
      EXPECT_EQ(c.heldRows(l, h), budget + c.positions - c.compressed_rows);
    }
  }
}

TEST(DraftCacheComparison, SharedRowsAreIdenticalAndDeeperDraftedRowsDiffer) {
  const auto model = fixtureModel("llama-tiny");
  const auto r = recorded(*model, CompressionSpec::evicting(EvictionPolicy::Streaming, 0.2), DraftCacheLayout::Compacted);
  const DraftCacheComparison& c = r.caches;
  double deepest = 0;
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      for (int64_t p = 0; p < c.positions; ++p) {
        for (bool values : {false, true}) {
          const double d = c.rowDifference(values, l, h, p);
          if (p < c.compressed_rows) EXPECT_EQ(d, 0.0) << "prefill row " << p << " layer " << l;
          else if (l == 0 && !values) EXPECT_LT(d, 1e-5) << "layer 0 key at " << p;
          if (l == c.layers - 1 && p >= c.compressed_rows) deepest = std::max(deepest, d);
        }
      }
    }
  }
  EXPECT_GT(deepest, 1e-3) << "the last layer's drafted rows should feel the compressed context";
}

TEST(DraftCacheComparison, EveryLayoutShowsTheSameHeldRows) {
  const auto model = fixtureModel("llama-tiny");
  const auto spec = CompressionSpec::evicting(EvictionPolicy::SnapKV, 0.3);
  const auto compacted = recorded(*model, spec, DraftCacheLayout::Compacted).caches;
  for (DraftCacheLayout layout : {DraftCacheLayout::Masked, DraftCacheLayout::Rerotated}) {
    const auto other = recorded(*model, spec, layout).caches;
    EXPECT_EQ(other.positions, compacted.positions) << draftCacheLayoutName(layout);
    EXPECT_EQ(other.draft_holds, compacted.draft_holds) << draftCacheLayoutName(layout);
  }
  // Masked holds the same numbers as compacted: the mask only hides rows.
  // Attention over the kept rows alone, or over every row with the hidden
  // ones weighted 0, adds the same terms; the matrix products may group them
  // differently with another count of rows (by CPU), so the keys written
  // after the compression agree to float32 rounding, not bit for bit.
  const auto masked = recorded(*model, spec, DraftCacheLayout::Masked).caches;
  ASSERT_EQ(masked.draft_keys.size(), compacted.draft_keys.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < masked.draft_keys.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(masked.draft_keys[i]) - compacted.draft_keys[i]));
    scale = std::max(scale, std::abs(static_cast<double>(compacted.draft_keys[i])));
  }
  std::printf("masked vs compacted drafting keys: max |d| %.3g over max |k| %.3g\n", worst, scale);
  EXPECT_LE(worst, 1e-5 * std::max(1.0, scale));
}

TEST(DraftCacheComparison, AFullBudgetHoldsEverythingAndMatches) {
  const auto model = fixtureModel("llama-tiny");
  const auto r = recorded(*model, {}, DraftCacheLayout::Compacted);
  const DraftCacheComparison& c = r.caches;
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      EXPECT_EQ(c.heldRows(l, h), c.positions);
      for (int64_t p = 0; p < c.positions; ++p) EXPECT_LT(c.rowDifference(false, l, h, p), 1e-4);
    }
  }
}

TEST(DraftCacheComparison, TheRoundLogAddsUp) {
  const auto model = fixtureModel("llama-tiny");
  const auto r = recorded(*model, CompressionSpec::evicting(EvictionPolicy::H2O, 0.25), DraftCacheLayout::Compacted);
  ASSERT_EQ(static_cast<int64_t>(r.rounds_log.size()), r.rounds);
  int64_t drafted = 0, accepted = 0, position = kPrompt;
  for (const SelfSpeculationRound& round : r.rounds_log) {
    EXPECT_EQ(round.first_position, position);
    drafted += static_cast<int64_t>(round.drafts.size());
    accepted += round.accepted;
    ASSERT_LE(round.accepted, static_cast<int64_t>(round.drafts.size()));
    // The accepted drafts and the target's token are the output, in order.
    for (int64_t i = 0; i < round.accepted; ++i) EXPECT_EQ(r.tokens[position - kPrompt + i], round.drafts[i]);
    if (position + round.accepted - kPrompt < kNew) EXPECT_EQ(r.tokens[position + round.accepted - kPrompt], round.target_token);
    position += round.accepted + 1;
  }
  EXPECT_EQ(drafted, r.drafted);
  EXPECT_EQ(accepted, r.accepted);
}

TEST(DraftCacheComparison, RefusesCachesOfDifferentShapes) {
  const KvCache full(2, 2, 8, torch::kFloat32);
  const KvCache draft(2, 2, 16, torch::kFloat32);
  EXPECT_THROW(compareDraftCache(full, draft, 0, 0), Error);
}

}  // namespace
}  // namespace kvscope
