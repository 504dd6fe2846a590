// The torch-free summary of a compression lab run (core/compress/compression_summary.h),
// which the GUI's Compression panel draws: every row's fate agrees with the
// result's kept sets and removal records (prefill and tova's decode steps),
// scores, K/V and zeroed entries are the result's tensors element for
// element, and the recorded cache is opt-in.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <set>
#include <vector>

#include "core/compress/compression_summary.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

CompressionInput summaryInput(const CausalLM& model, int64_t length, bool record) {
  CompressionInput input;
  input.prompt = testing_support::randomPrompts(1, model.config().vocab_size, length, length, 5)[0];
  input.max_new = 4;
  input.record_cache = record;
  return input;
}

TEST(CompressionSummary, FatesMatchTheKeptSetsAndRemovals) {
  const auto model = testing_support::fixtureModel("llama-tiny");
  for (EvictionPolicy policy : {EvictionPolicy::H2O, EvictionPolicy::Streaming, EvictionPolicy::Pyramid}) {
    const auto r = runCompressionLab(*model, summaryInput(*model, 30, false), CompressionSpec::evicting(policy, 0.5));
    const CompressionSummary s = summarizeCompression(r, model->config());
    ASSERT_EQ(s.rows, 29);
    int64_t removed = 0;
    for (int64_t l = 0; l < s.layers; ++l) {
      for (int64_t h = 0; h < s.kv_heads; ++h) {
        const std::set<int64_t> kept(r.kept[l][h].begin(), r.kept[l][h].end());
        std::vector<int64_t> expected;
        for (int64_t p = 0; p < s.rows; ++p) {
          if (kept.count(p) == 0) expected.push_back(p);
          EXPECT_EQ(s.score(l, h, p), r.scores[l][h][p].item<float>());
        }
        EXPECT_EQ(s.removedPositions(l, h), expected) << evictionPolicyName(policy) << " layer " << l << " head " << h;
        removed += static_cast<int64_t>(expected.size());
      }
    }
    EXPECT_GT(removed, 0);
    EXPECT_EQ(s.rows_evicted, removed);
    EXPECT_EQ(s.kl_mean, r.kl_mean);
    EXPECT_EQ(s.steps.size(), r.steps.size());
    EXPECT_EQ(s.outputError(1, 3), r.output_error[1][3].item<float>());
    EXPECT_FALSE(s.hasCache());  // not asked for
  }
}

TEST(CompressionSummary, TovaDecodeRemovalsAreMarked) {
  const auto model = testing_support::fixtureModel("llama-tiny");
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::Tova, 0.5);
  spec.eviction->budget.rows = 10;
  const auto r = runCompressionLab(*model, summaryInput(*model, 21, false), spec);
  const CompressionSummary s = summarizeCompression(r, model->config());
  int64_t decoding = 0, marked = 0;
  for (const RemovedRow& row : r.removed) decoding += row.step >= 0 ? 1 : 0;
  for (RowFate fate : s.fates) marked += fate == RowFate::EvictedDecoding ? 1 : 0;
  EXPECT_GT(decoding, 0);
  EXPECT_EQ(s.rows_evicted_decoding, decoding);
  EXPECT_GT(marked, 0);  // some prefill rows survived the prefill compression, then went
  EXPECT_LE(marked, decoding);
}

TEST(CompressionSummary, RecordedCacheAndZeroedEntriesAreTheResults) {
  const auto model = testing_support::fixtureModel("llama-tiny");
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::Knorm, 0.5);
  spec.pruning = PruneSettings{};
  spec.pruning->axis = PruneAxis::PerChannel;
  spec.pruning->k_sparsity = 0.5;
  spec.pruning->v_sparsity = 0.3;
  spec.pruning->dense_window = 4;
  const auto r = runCompressionLab(*model, summaryInput(*model, 30, true), spec);
  ASSERT_EQ(r.keys.size(), static_cast<size_t>(model->config().num_layers));
  const CompressionSummary s = summarizeCompression(r, model->config());
  ASSERT_TRUE(s.hasCache());
  ASSERT_TRUE(s.hasPruning());
  int64_t zeroed_k = 0, zeroed_v = 0;
  for (int64_t l = 0; l < s.layers; ++l) {
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      for (int64_t p = 0; p < s.rows; ++p) {
        for (int64_t d = 0; d < s.head_dim; ++d) {
          EXPECT_EQ(s.entry(false, l, h, p, d), r.keys[l][h][p][d].item<float>());
          EXPECT_EQ(s.entry(true, l, h, p, d), r.values[l][h][p][d].item<float>());
          const bool zk = !r.k_keep[l][h][p][d].item<bool>();
          EXPECT_EQ(s.zeroed(false, l, h, p, d), zk);
          if (zk) EXPECT_EQ(s.entry(false, l, h, p, d), 0.0f);  // zeroed in the cache too
        }
      }
      zeroed_k += s.zeroedEntries(false, l, h);
      zeroed_v += s.zeroedEntries(true, l, h);
    }
  }
  EXPECT_EQ(zeroed_k, r.pruned_k);
  EXPECT_EQ(zeroed_v, r.pruned_v);
  EXPECT_GT(zeroed_k, zeroed_v);
  // Out of range reads are harmless.
  EXPECT_EQ(s.fate(99, 0, 0), RowFate::Kept);
  EXPECT_TRUE(s.removedPositions(0, 99).empty());
}

}  // namespace
}  // namespace kvscope
