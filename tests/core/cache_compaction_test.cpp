// A cache that really compacts (KvCache::compact): after a policy's eviction
// the kept rows are gathered per kv head, and a forward over the compacted
// cache gives the masked cache's attention outputs and logits within 1e-5
// (Llama and GPT-2 fixtures, every policy, fractional and row budgets, one
// and several new rows, after appends and a crop by position); rows keep
// their positions per kv head; a mask that leaves kv heads with different
// counts, and crops into the gathered rows, are refused.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "core/compress/prefill_compression.h"
#include "core/error.h"
#include "core/model/probe_recorder.h"
#include "core/model/scoring.h"
#include "session_test_support.h"

namespace kvscope::compaction_test {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

constexpr double kCompactTolerance = 1e-5;

double largestGap(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

at::Tensor tokensOf(const std::vector<int64_t>& v, size_t from, size_t to) {
  return idsTensor({v.begin() + static_cast<int64_t>(from), v.begin() + static_cast<int64_t>(to)});
}

// Logits and per-layer attention outputs of one forward.
struct Outputs {
  at::Tensor logits;                    // [n, vocab]
  std::vector<at::Tensor> attention;    // per layer [heads, n, head_dim]
};

Outputs forwardRecorded(const CausalLM& model, const at::Tensor& tokens, int64_t start, KvCache& cache) {
  ProbeRecorder recorder({Probe::AttentionOutput});
  Outputs out;
  out.logits = model.forward(tokens, start, &cache, &recorder);
  out.attention = recorder.perLayer(Probe::AttentionOutput);
  return out;
}

void expectSameOutputs(const Outputs& masked, const Outputs& compacted, const std::string& what) {
  EXPECT_LE(largestGap(masked.logits, compacted.logits), kCompactTolerance) << what << ": logits";
  ASSERT_EQ(masked.attention.size(), compacted.attention.size()) << what;
  for (size_t l = 0; l < masked.attention.size(); ++l) {
    EXPECT_LE(largestGap(masked.attention[l], compacted.attention[l]), kCompactTolerance) << what << ": layer " << l;
  }
}

// Per layer and kv head, the positions the masked cache still reads must be
// the compacted cache's rows, in order.
void expectKeptPositions(const KvCache& masked, const KvCache& compacted, const std::string& what) {
  for (int64_t l = 0; l < masked.numLayers(); ++l) {
    const auto keep = masked.keepMask(l);  // [kv, T] or undefined
    const auto positions = compacted.rowPositions(l);  // [kv, kept]
    for (int64_t h = 0; h < masked.kvHeads(); ++h) {
      const auto expected = keep.defined() ? keep[h].nonzero().squeeze(1) : torch::arange(masked.length(l));
      ASSERT_EQ(positions.size(1), expected.size(0)) << what << ": layer " << l << " head " << h;
      EXPECT_TRUE(positions[h].equal(expected)) << what << ": layer " << l << " head " << h;
    }
  }
}

// Prefill, compress both copies alike, compact one; then feed `new_rows`
// tokens, feed again (rows appended after compaction), crop that second feed
// away by position and feed it once more: every forward must agree.
void expectCompactedEqualsMasked(const std::string& fixture, const CompressionSpec& spec, int64_t new_rows) {
  const auto model = fixtureModel(fixture);
  c10::InferenceMode guard;
  const int64_t prefill = 24;
  const auto tokens = randomPrompts(1, model->config().vocab_size, prefill + 2 * new_rows, prefill + 2 * new_rows, 5)[0];
  const std::string what = fixture + " " + evictionPolicyName(spec.eviction->policy) + " budget " +
                           std::to_string(spec.eviction->budget.fraction) + "/" +
                           std::to_string(spec.eviction->budget.rows) + ", " + std::to_string(new_rows) + " new rows";
  auto masked = model->makeCache(), compacted = model->makeCache();
  prefillAndCompress(*model, tokensOf(tokens, 0, prefill), *masked, spec);
  prefillAndCompress(*model, tokensOf(tokens, 0, prefill), *compacted, spec);
  for (int64_t l = 0; l < compacted->numLayers(); ++l) compacted->compact(l);
  expectKeptPositions(*masked, *compacted, what);
  EXPECT_LT(compacted->length(0), masked->length(0)) << what << ": nothing was compacted";
  EXPECT_EQ(compacted->endPosition(0), prefill) << what;

  const auto first = tokensOf(tokens, prefill, prefill + new_rows);
  const auto second = tokensOf(tokens, prefill + new_rows, prefill + 2 * new_rows);
  expectSameOutputs(forwardRecorded(*model, first, prefill, *masked), forwardRecorded(*model, first, prefill, *compacted),
                    what + ", first feed");
  const auto before_crop = forwardRecorded(*model, second, prefill + new_rows, *compacted);
  expectSameOutputs(forwardRecorded(*model, second, prefill + new_rows, *masked), before_crop, what + ", second feed");
  // Rejected drafts: drop the second feed by position and feed it again.
  masked->cropToPosition(prefill + new_rows);
  compacted->cropToPosition(prefill + new_rows);
  EXPECT_EQ(compacted->endPosition(0), prefill + new_rows) << what;
  expectSameOutputs(forwardRecorded(*model, second, prefill + new_rows, *masked),
                    forwardRecorded(*model, second, prefill + new_rows, *compacted), what + ", after the crop");
}

std::vector<CompressionSpec> specsToCheck() {
  std::vector<CompressionSpec> specs;
  for (EvictionPolicy policy : allEvictionPolicies()) {
    for (double fraction : {0.25, 0.5}) specs.push_back(CompressionSpec::evicting(policy, fraction));
    CompressionSpec rows = CompressionSpec::evicting(policy, 1.0);
    rows.eviction->budget.rows = 7;
    specs.push_back(rows);
  }
  return specs;
}

TEST(CacheCompaction, LlamaCompactedForwardEqualsMasked) {
  for (const CompressionSpec& spec : specsToCheck()) {
    for (int64_t new_rows : {1, 3}) expectCompactedEqualsMasked("llama-tiny", spec, new_rows);
  }
}

TEST(CacheCompaction, Gpt2CompactedForwardEqualsMasked) {
  for (const CompressionSpec& spec : specsToCheck()) {
    for (int64_t new_rows : {1, 3}) expectCompactedEqualsMasked("gpt2-tiny", spec, new_rows);
  }
}

TEST(CacheCompaction, EveryPolicyLeavesOneRowCountPerLayer) {
  // What compaction relies on: a budgeted eviction keeps the same number of
  // rows in every kv head of a layer (pyramid: a different number per layer).
  const auto model = fixtureModel("llama-tiny");
  c10::InferenceMode guard;
  const auto tokens = randomPrompts(1, model->config().vocab_size, 40, 40, 6)[0];
  for (const CompressionSpec& spec : specsToCheck()) {
    auto cache = model->makeCache();
    const PrefillCompression done = prefillAndCompress(*model, tokensOf(tokens, 0, tokens.size()), *cache, spec);
    for (int64_t l = 0; l < cache->numLayers(); ++l) {
      for (int64_t h = 0; h < cache->kvHeads(); ++h) {
        EXPECT_EQ(cache->keptRows(l, h), done.layer_budgets[l]) << evictionPolicyName(spec.eviction->policy);
      }
      cache->compact(l);
      EXPECT_EQ(cache->length(l), done.layer_budgets[l]);
      EXPECT_FALSE(cache->keepMask(l).defined());
    }
  }
}

TEST(CacheCompaction, RefusesKvHeadsWithDifferentCounts) {
  KvCache cache(1, 2, 4, torch::TensorOptions().dtype(torch::kFloat32));
  cache.append(0, torch::randn({2, 5, 4}), torch::randn({2, 5, 4}));
  auto keep = torch::ones({2, 5}, torch::kBool);
  keep[0][1] = false;  // head 0 keeps 4 rows, head 1 all 5
  cache.evictRows(0, keep);
  try {
    cache.compact(0);
    ADD_FAILURE() << "compact accepted kv heads with 4 and 5 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keep different numbers of rows (4, 5)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(0), 5);  // left as it was
}

TEST(CacheCompaction, GathersRowsPerHeadAndCropsOnlyWhatCameAfter) {
  KvCache cache(1, 2, 3, torch::TensorOptions().dtype(torch::kFloat32), 2);
  const auto k = torch::arange(2 * 6 * 3, torch::kFloat32).view({2, 6, 3}), v = -k;  // [kv, 6, D]
  cache.append(0, k, v);
  auto keep = torch::zeros({2, 6}, torch::kBool);
  for (int64_t r : {0, 2, 5}) keep[0][r] = true;
  for (int64_t r : {1, 2, 4}) keep[1][r] = true;
  cache.evictRows(0, keep);
  cache.compact(0);
  EXPECT_TRUE(cache.compacted(0));
  EXPECT_EQ(cache.length(0), 3);
  EXPECT_EQ(cache.endPosition(0), 6);
  EXPECT_TRUE(cache.rowPositions(0).equal(torch::tensor({0, 2, 5, 1, 2, 4}, torch::kInt64).view({2, 3})));
  EXPECT_TRUE(cache.keys(0)[0].equal(k[0].index_select(0, torch::tensor({0, 2, 5}, torch::kInt64))));
  EXPECT_TRUE(cache.values(0)[1].equal(v[1].index_select(0, torch::tensor({1, 2, 4}, torch::kInt64))));
  // Appends follow at the end, at positions 6, 7, ...; they grow the storage.
  cache.append(0, torch::ones({2, 4, 3}), torch::ones({2, 4, 3}));
  EXPECT_EQ(cache.endPosition(0), 10);
  EXPECT_TRUE(cache.rowPositions(0)[1].equal(torch::tensor({1, 2, 4, 6, 7, 8, 9}, torch::kInt64)));
  cache.cropToPosition(7);
  EXPECT_EQ(cache.length(0), 4);
  EXPECT_THROW(cache.cropToPosition(8), Error);  // positions it does not hold
  EXPECT_THROW(cache.crop(2), Error);            // into the gathered rows
  EXPECT_THROW(cache.evictFront(0, 1), Error);
  cache.clear();
  EXPECT_FALSE(cache.compacted(0));
  EXPECT_EQ(cache.endPosition(0), 0);
}

TEST(CacheCompaction, NothingMaskedIsANoOp) {
  KvCache cache(1, 2, 3, torch::TensorOptions().dtype(torch::kFloat32));
  cache.append(0, torch::randn({2, 4, 3}), torch::randn({2, 4, 3}));
  cache.compact(0);
  EXPECT_FALSE(cache.compacted(0));
  EXPECT_EQ(cache.length(0), 4);
  cache.crop(1);  // a plain cache crops anywhere, as before
  EXPECT_EQ(cache.endPosition(0), 1);
}

TEST(CacheCompaction, CloneIsADeepCopy) {
  // Self-speculation's one prefill: the verifying cache is a clone taken
  // before the drafting copy is compressed and compacted.
  KvCache cache(2, 2, 3, torch::TensorOptions().dtype(torch::kFloat32));
  for (int64_t l = 0; l < 2; ++l) cache.append(l, torch::randn({2, 4, 3}), torch::randn({2, 4, 3}));
  KvCache copy = cache.clone();
  const auto keys_before = cache.keys(0).clone();
  auto keep = torch::ones({2, 4}, torch::kBool);
  keep.select(1, 1).fill_(false);
  copy.evictRows(0, keep);
  copy.compact(0);
  copy.keys(0).fill_(7);
  EXPECT_TRUE(cache.keys(0).equal(keys_before));
  EXPECT_FALSE(cache.keepMask(0).defined());
  EXPECT_EQ(cache.length(0), 4);
  EXPECT_EQ(copy.length(0), 3);
  EXPECT_EQ(copy.endPosition(0), 4);
}

}  // namespace kvscope::compaction_test
