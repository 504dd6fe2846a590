// Re-rotating cached keys (core/model/key_rerotation.h): turning a key to the
// position it already has changes nothing; turning it from p to p' gives the
// key the model computes at p' (layer 0, whose keys depend only on the token
// and the position), also per kv head after a compaction and with pyramid's
// per-layer row counts; models without rotary keys are refused by name.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "core/compress/prefill_compression.h"
#include "core/compress/self_speculation.h"
#include "core/error.h"
#include "core/model/key_rerotation.h"
#include "core/model/scoring.h"
#include "session_test_support.h"

namespace kvscope::rerotation_test {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

// float32 angles of positions up to a few hundred: keys agree to about 1e-6
// of their size; 1e-4 of the largest entry leaves room and still catches a
// rotation by one position (a change of order 1e-1 in the fast channels).
double rotationTolerance(const at::Tensor& keys) { return 1e-4 * keys.abs().max().item<double>() + 1e-6; }

// Layer 0's keys of `tokens` fed into an empty cache at positions start, start + 1, ...
at::Tensor layerZeroKeysAt(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t start) {
  auto cache = model.makeCache();
  model.forwardUnchecked(idsTensor(tokens), start, cache.get(), nullptr, 0);
  return cache->keys(0).clone();  // [kv, n, D]
}

TEST(KeyRerotation, SamePositionIsTheIdentity) {
  const auto config = fixtureModel("llama-tiny")->config();
  torch::manual_seed(4);
  const auto keys = torch::randn({config.num_kv_heads, 9, config.head_dim});                            // [kv, T, D]
  const auto positions = torch::randint(0, 200, {config.num_kv_heads, 9}, torch::kInt64);              // [kv, T]
  EXPECT_TRUE(rerotateKeys(config, keys, positions, positions).equal(keys));
  // And there and back again is the identity up to rounding.
  const auto moved = rerotateKeys(config, keys, positions, positions + 37);
  EXPECT_GT((moved - keys).abs().max().item<double>(), 1e-2);
  EXPECT_LE((rerotateKeys(config, moved, positions + 37, positions) - keys).abs().max().item<double>(),
            rotationTolerance(keys));
}

TEST(KeyRerotation, EqualsTheKeyComputedAtTheNewPosition) {
  for (const char* fixture : {"llama-tiny", "qwen3-tiny"}) {
    const auto model = fixtureModel(fixture);
    c10::InferenceMode guard;
    const auto tokens = randomPrompts(1, model->config().vocab_size, 12, 12, 3)[0];
    const auto at_zero = layerZeroKeysAt(*model, tokens, 0);   // [kv, 12, D]
    const auto at_later = layerZeroKeysAt(*model, tokens, 90);  // [kv, 12, D]
    const int64_t kv = at_zero.size(0);
    const auto from = torch::arange(0, 12, torch::kInt64).unsqueeze(0).expand({kv, 12});
    const auto turned = rerotateKeys(model->config(), at_zero, from, from + 90);
    EXPECT_LE((turned - at_later).abs().max().item<double>(), rotationTolerance(at_later)) << fixture;
    EXPECT_GT((at_zero - at_later).abs().max().item<double>(), 1e-2) << fixture << ": the positions should matter";
  }
}

// After a compaction each kv head keeps other positions; re-rotated to
// contiguous positions, each head's keys must be those of its kept tokens
// fed at those positions.
void expectContiguousKeysPerHead(const CompressionSpec& spec) {
  const auto model = fixtureModel("llama-tiny");
  c10::InferenceMode guard;
  const auto tokens = randomPrompts(1, model->config().vocab_size, 30, 30, 12)[0];
  auto cache = model->makeCache();
  prefillAndCompress(*model, idsTensor(tokens), *cache, spec);
  std::vector<at::Tensor> kept_positions;
  for (int64_t l = 0; l < cache->numLayers(); ++l) {
    cache->compact(l);
    kept_positions.push_back(cache->rowPositions(l).clone());  // [kv, kept]
  }
  const int64_t end = rerotateToContiguous(model->config(), *cache);
  const std::string what = evictionPolicyName(spec.eviction->policy);
  for (int64_t l = 0; l < cache->numLayers(); ++l) {
    EXPECT_EQ(cache->endPosition(l), end) << what << " layer " << l;
    EXPECT_FALSE(cache->compacted(l));
  }
  const int64_t rows = cache->length(0), first = end - rows;
  EXPECT_TRUE(cache->rowPositions(0)[0].equal(torch::arange(first, end, torch::kInt64))) << what;
  for (int64_t h = 0; h < cache->kvHeads(); ++h) {
    std::vector<int64_t> kept_tokens;
    for (int64_t i = 0; i < rows; ++i) kept_tokens.push_back(tokens[kept_positions[0][h][i].item<int64_t>()]);
    const auto expected = layerZeroKeysAt(*model, kept_tokens, first)[h];  // [kept, D]
    EXPECT_LE((cache->keys(0)[h] - expected).abs().max().item<double>(), rotationTolerance(expected))
        << what << " kv head " << h;
  }
}

TEST(KeyRerotation, CompactedCacheBecomesContiguousPerKvHead) {
  expectContiguousKeysPerHead(CompressionSpec::evicting(EvictionPolicy::H2O, 0.3));
  expectContiguousKeysPerHead(CompressionSpec::evicting(EvictionPolicy::Streaming, 0.25));
  // Pyramid: layers keep different counts; each ends where the longest does.
  expectContiguousKeysPerHead(CompressionSpec::evicting(EvictionPolicy::Pyramid, 0.5));
}

void expectRefused(const std::string& fixture, const std::string& message) {
  const auto model = fixtureModel(fixture);
  try {
    checkKeysRerotatable(model->config());
    ADD_FAILURE() << fixture << " was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  SelfSpeculationOptions options;
  options.max_new = 4;
  options.layout = DraftCacheLayout::Rerotated;
  const auto prompt = randomPrompts(1, model->config().vocab_size, 20, 20, 2)[0];
  EXPECT_THROW(runSelfSpeculation(*model, prompt, CompressionSpec::evicting(EvictionPolicy::H2O, 0.5), options), Error);
}

TEST(KeyRerotation, ModelsWithoutRotaryKeysAreRefused) {
  expectRefused("gpt2-tiny", "learns absolute positions");
  expectRefused("phi3-longrope-tiny", "longrope");
}

}  // namespace kvscope::rerotation_test
