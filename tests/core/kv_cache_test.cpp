// KV cache storage, and cached vs uncached forwards over a long sequence.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>

#include "core/cache/kv_cache.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

const std::string kFixtures = KVSCOPE_FIXTURES;

TEST(KvCache, AppendGrowsAndKeepsRows) {
  KvCache cache(2, 2, 4, torch::kFloat32, /*initial_capacity=*/2);
  std::vector<torch::Tensor> written;
  for (int step = 0; step < 5; ++step) {
    auto k = torch::randn({2, 3, 4});
    written.push_back(k);
    for (int layer = 0; layer < 2; ++layer) cache.append(layer, k, k * 2);
    EXPECT_EQ(cache.length(), 3 * (step + 1));
  }
  EXPECT_GE(cache.capacity(0), 15);
  auto expected = torch::cat(written, 1);
  EXPECT_TRUE(torch::equal(cache.keys(1), expected));
  EXPECT_TRUE(torch::equal(cache.values(1), expected * 2));
}

// copyRows (the ledger's copy of a write) gives what keys() and values()
// narrowed to the rows give, for every layer at its own first row; it
// refuses rows past a layer's length and storage it cannot read plainly.
TEST(KvCache, CopyRowsIsTheStoredRowsOfEveryLayer) {
  KvCache cache(3, 2, 4, torch::kFloat32, /*initial_capacity=*/2);  // grows while appending
  for (int layer = 0; layer < 3; ++layer) {
    const auto k = torch::randn({2, 6 + layer, 4});
    cache.append(layer, k, -k);
  }
  const std::vector<int64_t> first = {1, 4, 5};
  const auto [k, v] = cache.copyRows(first, 2);  // [layers, kv_heads, 2, head_dim]
  ASSERT_EQ(k.sizes(), (std::vector<int64_t>{3, 2, 2, 4}));
  for (int64_t layer = 0; layer < 3; ++layer) {
    EXPECT_TRUE(torch::equal(k[layer], cache.keys(layer).narrow(1, first[layer], 2))) << layer;
    EXPECT_TRUE(torch::equal(v[layer], cache.values(layer).narrow(1, first[layer], 2))) << layer;
  }
  EXPECT_THROW(cache.copyRows({1, 4, 7}, 2), Error);  // layer 2 holds 8 rows: 7..8 is past it
  EXPECT_THROW(cache.copyRows({1, 4}, 2), Error);     // a first row per layer
  KvCache half(1, 1, 4, torch::kBFloat16);
  half.append(0, torch::randn({1, 3, 4}).to(torch::kBFloat16), torch::randn({1, 3, 4}).to(torch::kBFloat16));
  EXPECT_THROW(half.copyRows({0}, 1), Error);
}

TEST(KvCache, CropIsExactIncludingZeroAndFull) {
  KvCache cache(1, 1, 2, torch::kFloat32);
  cache.append(0, torch::ones({1, 5, 2}), torch::ones({1, 5, 2}));
  cache.crop(5);  // "drop 0": keeps everything (the [:-0] trap)
  EXPECT_EQ(cache.length(), 5);
  cache.crop(3);
  EXPECT_EQ(cache.length(), 3);
  EXPECT_EQ(cache.keys(0).size(1), 3);
  cache.crop(0);
  EXPECT_EQ(cache.length(), 0);
  EXPECT_THROW(cache.crop(1), Error);
}

TEST(KvCache, PerLayerLengthsCanDiffer) {
  KvCache cache(2, 1, 2, torch::kFloat32);
  for (int layer = 0; layer < 2; ++layer) cache.append(layer, torch::ones({1, 4, 2}), torch::ones({1, 4, 2}));
  cache.cropLayer(1, 2);
  EXPECT_FALSE(cache.uniformLength());
  EXPECT_EQ(cache.length(1), 2);
}

TEST(KvCache, RejectsWrongShape) {
  KvCache cache(1, 2, 4, torch::kFloat32);
  EXPECT_THROW(cache.append(0, torch::ones({3, 1, 4}), torch::ones({3, 1, 4})), Error);
  EXPECT_THROW(cache.append(1, torch::ones({2, 1, 4}), torch::ones({2, 1, 4})), Error);
}

// Cached vs uncached agree within 1e-4 over the whole 256-position context,
// and the cache length equals the tokens fed after every step and crop.
class CachedVsUncached : public ::testing::TestWithParam<std::string> {};

TEST_P(CachedVsUncached, AgreeOver256Positions) {
  torch::InferenceMode guard;
  auto model = loadCausalLM(kFixtures + "/models/" + GetParam(), torch::kFloat32);
  const int64_t L = model->config().contextLength();
  ASSERT_EQ(L, 256);
  auto generator = torch::make_generator<torch::CPUGeneratorImpl>(7);
  auto ids = torch::randint(model->config().vocab_size, {L}, generator, torch::kInt64);
  auto reference = model->forward(ids, 0, nullptr);  // [L, vocab]

  auto cache = model->makeCache();
  std::vector<torch::Tensor> rows;
  int64_t fed = 0;
  while (fed < L) {
    const int64_t chunk = std::min<int64_t>(1 + fed % 5, L - fed);  // steps of 1..5 tokens
    rows.push_back(model->forward(ids.narrow(0, fed, chunk), fed, cache.get()));
    fed += chunk;
    ASSERT_EQ(cache->length(), fed);
    ASSERT_TRUE(cache->uniformLength());
    if (fed % 40 == 0 && fed < L) {
      // Crop 3 entries and re-feed them: the logits must not change.
      cache->crop(fed - 3);
      ASSERT_EQ(cache->length(), fed - 3);
      auto refed = model->forward(ids.narrow(0, fed - 3, 3), fed - 3, cache.get());
      ASSERT_EQ(cache->length(), fed);
      EXPECT_LE((refed - reference.narrow(0, fed - 3, 3)).abs().max().item<double>(), 1e-4);
    }
  }
  auto cached = torch::cat(rows, 0);
  EXPECT_LE((cached - reference).abs().max().item<double>(), 1e-4);
  EXPECT_TRUE(torch::equal(cached.argmax(1), reference.argmax(1)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CachedVsUncached,
                         ::testing::Values("llama-tiny", "gpt2-tiny", "qwen2-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace kvscope
