// Eviction through the cache's keep mask and the compression lab
// (core/cache/kv_cache.h, cache_compression.h, core/compress/compression_lab.h):
// a masked forward equals a forward over a cache where those rows are really
// absent (Llama and GPT-2 fixtures, one and several new tokens, per kv head);
// budget 1.0 gives KL exactly 0 for every policy; the removal records match
// the kept sets and the lab's event log; element pruning zeroes exactly what
// it says.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cache/cache_compression.h"
#include "core/cache/eviction_masks.h"
#include "core/cache/row_demotion.h"
#include "core/cache/row_selection.h"
#include "core/compress/compression_lab.h"
#include "core/error.h"
#include "core/model/attention.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

constexpr double kTolerance = 1e-5;

double maxAbs(const at::Tensor& t) { return t.abs().max().item<double>(); }

at::Tensor ids(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kInt64); }

std::vector<int64_t> prompt(const CausalLM& model, int64_t length, uint64_t seed) {
  return randomPrompts(1, model.config().vocab_size, length, length, seed)[0];
}

// Logits of `next` tokens fed after positions [0, prefix): once over a cache
// whose `removed` positions are masked out (every layer and kv head), once
// over a cache built without those rows at all.
void expectMaskedEqualsAbsent(const std::string& fixture, int64_t new_tokens) {
  const auto model = fixtureModel(fixture);
  c10::InferenceMode guard;
  const int64_t prefix = 12;
  const auto tokens = prompt(*model, prefix + new_tokens, 11);
  const std::vector<int64_t> head(tokens.begin(), tokens.begin() + prefix), tail(tokens.begin() + prefix, tokens.end());
  const std::set<int64_t> removed{1, 4, 5, 9};

  auto masked = model->makeCache();
  model->forward(ids(head), 0, masked.get());
  auto absent = model->makeCache();
  std::vector<int64_t> kept_rows;
  for (int64_t p = 0; p < prefix; ++p) {
    if (removed.count(p) == 0) kept_rows.push_back(p);
  }
  const int64_t kv_heads = model->config().num_kv_heads;
  for (int64_t l = 0; l < model->config().num_layers; ++l) {
    auto keep = torch::ones({kv_heads, prefix}, torch::kBool);  // [kv, T]
    for (int64_t p : removed) keep.select(1, p).fill_(false);
    masked->evictRows(l, keep);
    absent->append(l, masked->keys(l).index_select(1, ids(kept_rows)).clone(),
                   masked->values(l).index_select(1, ids(kept_rows)).clone());
  }
  const auto with_mask = model->forward(ids(tail), prefix, masked.get());
  const auto without_rows = model->forwardUnchecked(ids(tail), prefix, absent.get());
  EXPECT_LE(maxAbs(with_mask - without_rows), kTolerance) << fixture << ", " << new_tokens << " new tokens";
  // And the mask did something: the full cache gives other logits.
  auto full = model->makeCache();
  model->forward(ids(head), 0, full.get());
  EXPECT_GT(maxAbs(model->forward(ids(tail), prefix, full.get()) - with_mask), 1e-3) << fixture;
}

TEST(EvictionMask, LlamaMaskedForwardEqualsRowsAbsent) {
  expectMaskedEqualsAbsent("llama-tiny", 1);  // the single-query path that builds no causal mask
  expectMaskedEqualsAbsent("llama-tiny", 3);
}

TEST(EvictionMask, Gpt2MaskedForwardEqualsRowsAbsent) {
  expectMaskedEqualsAbsent("gpt2-tiny", 1);
  expectMaskedEqualsAbsent("gpt2-tiny", 3);
}

TEST(EvictionMask, PerKvHeadMaskEqualsEachHeadWithItsOwnRows) {
  torch::manual_seed(3);
  const int64_t heads = 4, kv_heads = 2, rows = 9, D = 8;
  const auto keys = torch::randn({kv_heads, rows, D}), values = torch::randn({kv_heads, rows, D});
  auto keep = torch::ones({kv_heads, rows}, torch::kBool);
  for (int64_t r : {0, 2, 3}) keep[0][r] = false;  // kv head 0 loses rows 0, 2, 3
  for (int64_t r : {1, 5}) keep[1][r] = false;     // kv head 1 loses rows 1, 5
  for (int64_t n : {1, 3}) {
    const auto q = torch::randn({heads, n, D});
    AttentionOptions options;
    options.scale = 0.3;
    options.keep = keep;
    const auto out = causalAttention(q, keys, values, options, 0, nullptr);  // [heads, n, D]
    for (int64_t g = 0; g < kv_heads; ++g) {
      // The kv head's rows really absent. Every removed row lies before the
      // last n rows, so each query still sees the same rows causally.
      const auto kept = keep[g].nonzero().squeeze(1);
      AttentionOptions plain;
      plain.scale = 0.3;
      const auto alone = causalAttention(q.narrow(0, 2 * g, 2), keys[g].index_select(0, kept).unsqueeze(0),
                                         values[g].index_select(0, kept).unsqueeze(0), plain, 0, nullptr);
      EXPECT_LE(maxAbs(out.narrow(0, 2 * g, 2) - alone), 1e-6) << "kv head " << g << ", n " << n;
    }
  }
}

TEST(EvictionMask, CacheCarriesTheMaskThroughAppendCropAndClear) {
  KvCache cache(1, 2, 4, torch::TensorOptions().dtype(torch::kFloat32), 2);
  cache.append(0, torch::randn({2, 3, 4}), torch::randn({2, 3, 4}));
  EXPECT_FALSE(cache.keepMask(0).defined());
  auto keep = torch::ones({2, 3}, torch::kBool);
  keep[1][0] = false;
  cache.evictRows(0, keep);
  cache.evictRows(0, torch::ones({2, 3}, torch::kBool));  // removal is final
  EXPECT_EQ(cache.keptRows(0, 0), 3);
  EXPECT_EQ(cache.keptRows(0, 1), 2);
  cache.append(0, torch::randn({2, 4, 4}), torch::randn({2, 4, 4}));  // grows past the capacity
  EXPECT_EQ(cache.keptRows(0, 1), 6);
  EXPECT_FALSE(cache.keepMask(0)[1][0].item<bool>());
  cache.evictFront(0, 1);
  EXPECT_EQ(cache.keptRows(0, 1), 6);  // the evicted row went with the front
  EXPECT_THROW(cache.evictRows(0, torch::ones({2, 5}, torch::kBool)), Error);
  cache.clear();
  EXPECT_FALSE(cache.keepMask(0).defined());
}

CompressionInput labInput(const CausalLM& model, int64_t prompt_length, int64_t steps) {
  CompressionInput input;
  const auto tokens = prompt(model, prompt_length + steps, 21);
  input.prompt.assign(tokens.begin(), tokens.begin() + prompt_length);
  input.continuation.assign(tokens.begin() + prompt_length, tokens.end());
  return input;
}

TEST(CompressionLab, BudgetOneGivesKlExactlyZeroForEveryPolicy) {
  for (const char* fixture : {"llama-tiny", "gpt2-tiny"}) {
    const auto model = fixtureModel(fixture);
    const auto input = labInput(*model, 24, 6);
    for (EvictionPolicy policy : allEvictionPolicies()) {
      const auto r = runCompressionLab(*model, input, CompressionSpec::evicting(policy, 1.0));
      EXPECT_EQ(r.kl_max, 0.0) << fixture << " " << evictionPolicyName(policy);
      EXPECT_EQ(r.top1_agreement, 1.0);
      EXPECT_EQ(r.attention_mass, 1.0);
      EXPECT_TRUE(r.removed.empty());
      EXPECT_EQ(r.bytes_kept, r.bytes_full);
      EXPECT_EQ(r.steps.size(), 7u);
      EXPECT_EQ(r.perplexity_full, r.perplexity_compressed);
    }
    // And a real budget moves the distribution (the test can fail).
    const auto half = runCompressionLab(*model, input, CompressionSpec::evicting(EvictionPolicy::Knorm, 0.25));
    EXPECT_GT(half.kl_mean, 0.0) << fixture;
    EXPECT_LT(half.attention_mass, 1.0) << fixture;
  }
}

TEST(CompressionLab, RemovalRecordsMatchTheKeptSets) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 30, 5);
  for (EvictionPolicy policy : allEvictionPolicies()) {
    const auto r = runCompressionLab(*model, input, CompressionSpec::evicting(policy, 0.5));
    const std::string name = evictionPolicyName(policy);
    ASSERT_EQ(r.kept.size(), 2u) << name;
    ASSERT_EQ(r.scores.size(), 2u) << name;
    EXPECT_EQ(r.scores[0].sizes().vec(), (std::vector<int64_t>{2, 29})) << name;
    for (int64_t l = 0; l < 2; ++l) {
      ASSERT_EQ(r.kept[l].size(), 2u) << name;
      for (int64_t h = 0; h < 2; ++h) {
        std::set<int64_t> all(r.kept[l][h].begin(), r.kept[l][h].end());
        EXPECT_EQ(static_cast<int64_t>(r.kept[l][h].size()), r.layer_budgets[l]) << name;
        for (const RemovedRow& row : r.removed) {
          if (row.layer != l || row.kv_head != h || row.step >= 0) continue;
          EXPECT_TRUE(all.insert(row.position).second) << name << ": position " << row.position << " kept and removed";
          EXPECT_EQ(row.score, r.scores[l][h][row.position].item<double>()) << name;
        }
        EXPECT_EQ(all.size(), 29u) << name << ": kept + removed cover the prefill";
        EXPECT_EQ(*all.rbegin(), 28) << name;
      }
    }
    // Only tova removes during decoding, one row per kv head when over budget.
    for (const RemovedRow& row : r.removed) {
      if (policy != EvictionPolicy::Tova) EXPECT_EQ(row.step, -1) << name;
    }
  }
  const auto pyramid = runCompressionLab(*model, input, CompressionSpec::evicting(EvictionPolicy::Pyramid, 0.5));
  EXPECT_EQ(pyramid.layer_budgets, pyramidBudgets(15, 2, 29));
  EXPECT_GT(pyramid.layer_budgets[0], pyramid.layer_budgets[1]);
}

TEST(CompressionLab, TovaKeepsItsBudgetWhileDecoding) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 21, 8);  // prefill 20 rows, 9 steps
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::Tova, 0.5);
  spec.eviction->budget.rows = 10;
  const auto r = runCompressionLab(*model, input, spec);
  // 10 removed per kv head at prefill, then one per step (20 + 1 rows > 10).
  int64_t prefill = 0, decoding = 0;
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (const RemovedRow& row : r.removed) {
    (row.step < 0 ? prefill : decoding) += 1;
    EXPECT_TRUE(seen.insert({row.layer, row.kv_head, row.position}).second) << "removed twice";
  }
  EXPECT_EQ(prefill, 2 * 2 * 10);
  EXPECT_EQ(decoding, 2 * 2 * 9);
  // One row per layer and kv head at every step: the cache stays at 10 rows.
  std::map<int64_t, std::set<std::pair<int64_t, int64_t>>> heads_at_step;
  for (const RemovedRow& row : r.removed) {
    if (row.step >= 0) EXPECT_TRUE(heads_at_step[row.step].insert({row.layer, row.kv_head}).second) << row.step;
  }
  ASSERT_EQ(heads_at_step.size(), 9u);
  for (const auto& [step, heads] : heads_at_step) EXPECT_EQ(heads.size(), 4u) << "step " << step;
}

// The lab's caches are tracked: its event log holds both prefill writes, the
// compression, and at every step both writes and the step's TOVA eviction,
// whose masked rows are exactly the removals the result lists for that step.
TEST(CompressionLab, ItsWritesAndEvictionsAreLoggedStepByStep) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 21, 8);  // prefill 20 rows, 9 steps
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::Tova, 0.5);
  spec.eviction->budget.rows = 10;
  const auto r = runCompressionLab(*model, input, spec);
  const auto& events = r.events.events();
  const int64_t layers = model->config().num_layers;
  ASSERT_EQ(events.size(), 3u + 3u * r.steps.size());

  // The (layer, kv head, position) rows an Evict event masked: positions from
  // the drafting copy's layout just before it (row r holds position r).
  const auto maskedRows = [&](size_t index) {
    const CacheLayout before = r.events.layoutAfterEvents(CacheRole::Drafter, layers, index);
    std::set<std::tuple<int64_t, int64_t, int64_t>> rows;
    for (const MaskedRow& m : events[index].masked) {
      const auto& held = before.layers[m.layer];
      const auto row = std::find(held.begin(), held.end(), m.entry) - held.begin();
      rows.insert({m.layer, m.kv_head, row});
    }
    return rows;
  };
  const auto removedAt = [&](int64_t step) {
    std::set<std::tuple<int64_t, int64_t, int64_t>> rows;
    for (const RemovedRow& row : r.removed) {
      if (row.step == step) rows.insert({row.layer, row.kv_head, row.position});
    }
    return rows;
  };

  EXPECT_EQ(events[0].cache, CacheRole::Target);
  EXPECT_EQ(events[0].kind, CacheEventKind::Append);
  EXPECT_EQ(events[0].written.size(), 20u);
  EXPECT_EQ(events[1].cache, CacheRole::Drafter);
  EXPECT_EQ(events[1].written.size(), 20u);
  EXPECT_EQ(events[2].policy, "tova");
  EXPECT_EQ(events[2].moment().round, 0);
  EXPECT_EQ(maskedRows(2), removedAt(-1));
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const size_t first = 3 + 3 * i;
    const int64_t round = static_cast<int64_t>(i) + 1;
    EXPECT_EQ(events[first].cache, CacheRole::Drafter) << i;
    EXPECT_EQ(events[first].phase, Phase::Draft) << i;
    EXPECT_EQ(events[first + 1].cache, CacheRole::Target) << i;
    EXPECT_EQ(events[first + 1].phase, Phase::Verify) << i;
    for (size_t k : {first, first + 1}) {
      EXPECT_EQ(events[k].kind, CacheEventKind::Append) << i;
      EXPECT_EQ(events[k].round, round) << i;
      EXPECT_EQ(events[k].written.size(), 1u) << i;
    }
    const CacheEvent& evict = events[first + 2];
    EXPECT_EQ(evict.cache, CacheRole::Drafter) << i;
    EXPECT_EQ(evict.moment().round, round) << i;
    EXPECT_EQ(evict.phase, Phase::Prune) << i;
    EXPECT_EQ(evict.policy, "tova") << i;
    const auto step_rows = removedAt(static_cast<int64_t>(i));
    EXPECT_EQ(step_rows.size(), 4u) << i;  // one per layer and kv head
    EXPECT_EQ(maskedRows(first + 2), step_rows) << i;
  }
  // Replayed, the log masks every row the result says was removed.
  EXPECT_EQ(masksAfterEvents(r.events, CacheRole::Drafter, events.size()).size(),
            static_cast<int64_t>(r.removed.size()));
}

TEST(CompressionLab, DemotionKeepsRowsAsLowPrecisionCopies) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 30, 5);  // prefill 29 rows; budget 0.25 keeps 7 per kv head
  const auto evicted = runCompressionLab(*model, input, CompressionSpec::evicting(EvictionPolicy::H2O, 0.25));
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::H2O, 0.25);
  for (int64_t bits : {8, 4}) {
    spec.eviction->demote_bits = bits;
    const auto demoted = runCompressionLab(*model, input, spec);
    EXPECT_EQ(demoted.demoted, 2 * 2 * 22) << bits;
    EXPECT_EQ(demoted.removed.size(), evicted.removed.size()) << bits;
    EXPECT_EQ(demoted.attention_mass, 1.0) << bits;  // nothing hidden
    EXPECT_GT(demoted.demote_max_error, 0.0) << bits;
    EXPECT_GT(demoted.kl_mean, 0.0) << bits;
    EXPECT_LT(demoted.kl_mean, evicted.kl_mean) << bits;
    const int64_t D = model->config().head_dim;
    EXPECT_EQ(demoted.bytes_kept, evicted.bytes_kept + 2 * demotedRowBytes(2 * 2 * 22, D, bits)) << bits;
  }
  spec.eviction->demote_bits = 2;
  EXPECT_THROW(runCompressionLab(*model, input, spec), Error);
}

TEST(CompressionLab, ElementPruningZeroesTheRequestedEntries) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 21, 3);  // prefill 20 rows
  CompressionSpec spec;
  spec.pruning = PruneSettings{};
  spec.pruning->k_sparsity = 0.5;
  spec.pruning->v_sparsity = 0.25;
  spec.pruning->dense_window = 4;
  const int64_t D = model->config().head_dim, cells = 2 * 2 * 16;  // layers * kv heads * pruned rows
  const auto r = runCompressionLab(*model, input, spec);
  EXPECT_EQ(r.pruned_k, cells * (D - keptEntries(D, 0.5)));
  EXPECT_EQ(r.pruned_v, cells * (D - keptEntries(D, 0.25)));
  EXPECT_EQ(r.bytes_full - r.bytes_kept, (r.pruned_k + r.pruned_v) * 4);
  EXPECT_GT(r.kl_mean, 0.0);
  spec.pruning->k_sparsity = spec.pruning->v_sparsity = 0;
  EXPECT_EQ(runCompressionLab(*model, input, spec).kl_max, 0.0);
}

TEST(CompressionLab, ElementPruningAfterEvictionPrunesOnlyTheKeptRows) {
  const auto model = fixtureModel("llama-tiny");
  const auto input = labInput(*model, 21, 2);  // prefill 20 rows
  // h2o keeps 10 rows per kv head, the last 5 among them (its window): of the
  // 16 rows before a dense window of 4, each kv head still holds 6.
  CompressionSpec spec = CompressionSpec::evicting(EvictionPolicy::H2O, 0.5);
  spec.eviction->budget.rows = 10;
  spec.pruning = PruneSettings{};
  spec.pruning->k_sparsity = 0.5;
  spec.pruning->v_sparsity = 0.25;
  spec.pruning->dense_window = 4;
  const auto r = runCompressionLab(*model, input, spec);
  const int64_t D = model->config().head_dim, cells = 2 * 2 * 6;  // layers * kv heads * kept rows before the window
  EXPECT_EQ(r.pruned_k, cells * (D - keptEntries(D, 0.5)));
  EXPECT_EQ(r.pruned_v, cells * (D - keptEntries(D, 0.25)));
  const int64_t kept_entries = 2 * 2 * 10 * D;  // layers * kv heads * kept rows * head_dim, for K and for V
  EXPECT_EQ(r.bytes_kept, 4 * (2 * kept_entries - r.pruned_k - r.pruned_v));
}

TEST(CompressionLab, PruneElementsLeavesTheDenseWindowAlone) {
  const auto model = fixtureModel("llama-tiny");
  c10::InferenceMode guard;
  auto cache = model->makeCache();
  model->forward(ids(prompt(*model, 20, 4)), 0, cache.get());
  const auto before = cache->keys(1).clone();        // [kv, 20, D]
  const auto values_before = cache->values(1).clone();  // [kv, 20, D]
  PruneSettings settings;
  settings.axis = PruneAxis::PerChannel;
  settings.k_sparsity = 0.7;
  settings.dense_window = 6;
  pruneElements(*cache, settings, {}, {});
  const auto after = cache->keys(1);
  EXPECT_TRUE(torch::equal(after.narrow(1, 14, 6), before.narrow(1, 14, 6)));
  // Per channel, exactly keptEntries(14, 0.7) of the 14 older rows survive.
  const auto nonzero = after.narrow(1, 0, 14).ne(0).sum(1);  // [kv, D]
  EXPECT_TRUE(torch::equal(nonzero, torch::full_like(nonzero, keptEntries(14, 0.7))));
  EXPECT_TRUE(torch::equal(cache->values(1), values_before));  // V sparsity 0: untouched
}

TEST(CompressionLab, RefusesEvictionOnSlidingWindowModelsAndBadInput) {
  const auto sliding = fixtureModel("mistral-sw-tiny");
  const auto input = labInput(*sliding, 12, 2);
  try {
    runCompressionLab(*sliding, input, CompressionSpec::evicting(EvictionPolicy::H2O, 0.5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window"), std::string::npos) << e.what();
  }
  CompressionSpec pruning;
  pruning.pruning = PruneSettings{};
  pruning.pruning->dense_window = 2;
  EXPECT_NO_THROW(runCompressionLab(*sliding, input, pruning));
  const auto model = fixtureModel("llama-tiny");
  CompressionInput one;
  one.prompt = {5};
  EXPECT_THROW(runCompressionLab(*model, one, CompressionSpec::evicting(EvictionPolicy::H2O, 0.5)), Error);
  EXPECT_THROW(runCompressionLab(*model, labInput(*model, 8, 1), CompressionSpec::evicting(EvictionPolicy::H2O, 0)), Error);
}

}  // namespace
}  // namespace kvscope
