// A forward whose logits are NaN or Inf stops with an error naming
// the layer and step where values first became non-finite and the config
// fields involved, instead of handing NaN to a sampler that then picks token
// 0 forever. Such configs are refused by the parser now; here
// they are set on the parsed config directly, as the old parser let them
// through, to show what the guard says when something else gets through.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <functional>
#include <limits>

#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"
#include "core/model/finite_logits.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return (fs::path(KVSCOPE_FIXTURES) / "models" / name).string(); }

// The fixture's weights under a config edited after parsing (and optionally
// with one tensor replaced by NaN).
std::unique_ptr<CausalLM> modelWith(const std::string& name, const std::function<void(ModelConfig&)>& edit,
                                    const std::string& nan_tensor = "") {
  ModelConfig config = loadModelConfig(fixture(name) + "/config.json");
  edit(config);
  const Checkpoint ckpt = Checkpoint::open(fixture(name));
  NamedTensors tensors;
  for (const TensorSpec& spec : expectedTensors(config)) {
    at::Tensor t = ckpt.load(spec.name, torch::kFloat32);
    if (spec.name == nan_tensor) t.fill_(std::numeric_limits<float>::quiet_NaN());
    tensors.emplace_back(spec.name, t);
  }
  return buildCausalLM(config, tensors, torch::kFloat32, fixture(name));
}

at::Tensor ids(std::vector<int64_t> v) { return torch::tensor(v, torch::kInt64); }

TEST(FiniteLogits, AllFiniteSeesOneBadValueAnywhere) {
  at::Tensor x = torch::zeros({3, 1000});
  EXPECT_TRUE(allFinite(x));
  EXPECT_TRUE(allFinite(torch::zeros({0, 512})));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    at::Tensor y = x.clone();
    y[1][517] = bad;
    EXPECT_FALSE(allFinite(y)) << bad;
  }
  EXPECT_TRUE(allFinite(torch::full({4}, 3e38f))) << "large is not infinite";
  // The plain pass reads contiguous float32; a strided view and float64 go to torch.
  at::Tensor wide = torch::zeros({1000, 3});
  wide[517][1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(allFinite(wide.t()));
  EXPECT_TRUE(allFinite(wide.t()[0]));
  at::Tensor doubles = torch::zeros({9}, torch::kFloat64);
  doubles[8] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(allFinite(doubles));
  at::Tensor denormal = torch::full({33}, std::numeric_limits<float>::denorm_min());
  EXPECT_TRUE(allFinite(denormal)) << "a denormal is finite";
}

TEST(FiniteLogits, NanWeightsNamedByLayerStepAndTensor) {
  torch::InferenceMode guard;
  const auto model = modelWith("llama-tiny", [](ModelConfig&) {}, "model.layers.1.mlp.down_proj.weight");
  const std::vector<std::string> parts = {"non-finite logits", "in layer 1, at the MLP", "model.layers.1.mlp",
                                          "hidden_act"};
  // Without a cache, and as a cached decode step after a prefill that computed no logits.
  hostile::expectRefused([&] { model->forward(ids({5, 6, 7}), 0, nullptr); }, parts);
  auto cache = model->makeCache();
  model->forward(ids({5, 6, 7}), 0, cache.get(), nullptr, /*logit_rows=*/0);
  hostile::expectRefused([&] { model->forward(ids({8}), 3, cache.get()); }, parts);
  // The failed forward kept none of its rows: the caller can feed it again.
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) EXPECT_EQ(cache->length(layer), 3) << layer;
  hostile::expectRefused([&] { model->forward(ids({8}), 3, cache.get()); }, parts);
}

TEST(FiniteLogits, LongRopeOriginalContextOfOneNamesTheRotaryFields) {
  torch::InferenceMode guard;
  const auto model = modelWith("phi3-longrope-tiny", [](ModelConfig& c) { c.rope_scaling.original_max_position_embeddings = 1; });
  hostile::expectRefused([&] { model->forward(ids({5, 6, 7}), 0, nullptr); },
                         {"in layer 0, at the query after RoPE", "original_max_position_embeddings", "rope_scaling"});
}

TEST(FiniteLogits, LongRopeFactorsFloat32RoundsToZero) {
  torch::InferenceMode guard;
  const auto model = modelWith("phi3-longrope-tiny", [](ModelConfig& c) { c.rope_scaling.short_factor.assign(8, 1e-300); });
  hostile::expectRefused([&] { model->forward(ids({5, 6, 7}), 0, nullptr); },
                         {"in layer 0, at the query after RoPE", "short_factor, long_factor"});
}

TEST(FiniteLogits, NonFiniteRowsAlreadyInTheCacheAreNamed) {
  torch::InferenceMode guard;
  const auto model = modelWith("llama-tiny", [](ModelConfig&) {});
  auto cache = model->makeCache();
  const ModelConfig& c = model->config();
  const at::Tensor nan = torch::full({c.num_kv_heads, 1, c.head_dim}, std::numeric_limits<float>::quiet_NaN());
  for (int64_t layer = 0; layer < c.num_layers; ++layer) cache->append(layer, nan, nan);
  hostile::expectRefused([&] { model->forward(ids({8}), 1, cache.get()); },
                         {"in layer 0, at the attention weights", "already non-finite (written by an earlier forward)"});
}

}  // namespace
}  // namespace kvscope
