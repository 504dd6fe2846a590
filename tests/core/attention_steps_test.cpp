// Attention step by step (core/explain/attention_steps.h) against the
// engine's own forward (its attention probabilities, output before o_proj and
// attention output after o_proj, read through a sink of this test) and against an independent
// recomputation from the checkpoint (attention_reference.h), for GPT-2 and
// the Llama family (GQA, sliding windows, Gemma 2's scale and soft-cap,
// Qwen3's q/k norms, Phi-3's longrope).
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "attention_reference.h"
#include "core/error.h"
#include "core/explain/attention_steps.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

constexpr double kTolerance = 1e-5;

const std::vector<std::string> kModels = {"gpt2-tiny", "llama-tiny", "qwen2-tiny", "qwen3-tiny", "gemma2-tiny",
                                          "phi3-tiny", "phi3-longrope-tiny", "mistral-sw-tiny"};

// The forward's attention probabilities and outputs of every layer.
class ForwardAttention : public ProbeSink {
 public:
  // One uncached forward over `ids`, recording its attention probes.
  void record(const CausalLM& model, const std::vector<int64_t>& ids) {
    c10::InferenceMode guard;
    model.forward(torch::tensor(ids, torch::kInt64), 0, nullptr, this);
  }
  bool wants(Probe probe, int64_t) const override {
    return probe == Probe::AttentionWeights || probe == Probe::AttentionOutput || probe == Probe::AttentionProjected;
  }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    auto& into = probe == Probe::AttentionWeights ? weights : probe == Probe::AttentionOutput ? outputs : projected;
    into[layer] = value.clone();
  }
  std::map<int64_t, at::Tensor> weights;    // [heads, n, keys]
  std::map<int64_t, at::Tensor> outputs;    // [heads, n, head_dim]
  std::map<int64_t, at::Tensor> projected;  // [n, hidden] after o_proj
};

std::vector<int64_t> prompt(const CausalLM& model, int64_t length, uint64_t seed) {
  return randomPrompts(1, model.config().vocab_size, length, length, seed)[0];
}

double maxAbs(const at::Tensor& t) { return t.numel() == 0 ? 0.0 : t.abs().max().item<double>(); }

// x rotated by `angle` per channel pair (i, i + D/2), scaled by magnitude.
at::Tensor rotated(const at::Tensor& x, const at::Tensor& angle, double magnitude) {  // x: [D], angle: [D/2]
  const int64_t half = x.size(0) / 2;
  const auto a = x.narrow(0, 0, half), b = x.narrow(0, half, half);
  return torch::cat({a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()}) * magnitude;
}

TEST(AttentionSteps, WeightsAndOutputEqualTheModelsOwnForward) {
  double worst_weights = 0, worst_output = 0;
  for (const std::string& name : kModels) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    const ModelConfig& c = model->config();
    const auto ids = prompt(*model, 24, 7);
    ForwardAttention forward;
    forward.record(*model, ids);
    for (int64_t layer = 0; layer < c.num_layers; ++layer) {
      for (int64_t head : {int64_t{0}, c.num_heads - 1}) {
        for (int64_t position : {int64_t{0}, int64_t{9}, int64_t{23}}) {
          SCOPED_TRACE("layer " + std::to_string(layer) + " head " + std::to_string(head) + " position " +
                       std::to_string(position));
          const AttentionSteps steps = attentionSteps(*model, ids, {layer, head, position});
          const auto model_weights = forward.weights.at(layer)[head][position];  // [24]
          const double dw = maxAbs(steps.weights - model_weights.narrow(0, 0, position + 1));
          const double dout = maxAbs(steps.output - forward.outputs.at(layer)[head][position]);
          EXPECT_LE(dw, kTolerance);
          EXPECT_LE(dout, kTolerance);
          EXPECT_EQ(maxAbs(model_weights.narrow(0, position + 1, 23 - position)), 0.0) << "a later key had weight";
          EXPECT_NEAR(steps.weights.sum().item<double>(), 1.0, kTolerance);
          EXPECT_LE(steps.model_difference, kTolerance);
          worst_weights = std::max(worst_weights, dw);
          worst_output = std::max(worst_output, dout);
        }
      }
    }
  }
  std::printf("max |weights - model|: %.3g, max |output - model|: %.3g\n", worst_weights, worst_output);
}

// Layer 0 from the checkpoint with plain loops in double precision.
TEST(AttentionSteps, IndependentRecomputationFromTheCheckpoint) {
  double worst = 0, worst_projection = 0;
  for (const std::string& name : {"gpt2-tiny", "llama-tiny", "gemma2-tiny", "mistral-sw-tiny"}) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    const testing_support::ReferenceLayer0 reference(name);
    const auto ids = prompt(*model, 20, 11);
    for (int64_t head : {int64_t{1}, model->config().num_heads - 1}) {
      for (int64_t position : {int64_t{4}, int64_t{19}}) {
        SCOPED_TRACE("head " + std::to_string(head) + " position " + std::to_string(position));
        const AttentionSteps steps = attentionSteps(*model, ids, {0, head, position});
        const auto ref = reference.run(ids, head, position);
        using testing_support::maxDifference;
        EXPECT_LE(maxDifference(steps.hidden, ref.hidden), 1e-4);
        EXPECT_LE(maxDifference(steps.q_before_rope, ref.q_before_rope), 1e-4);
        EXPECT_LE(maxDifference(steps.q, ref.q), 1e-4);
        EXPECT_LE(maxDifference(steps.keys, ref.keys), 1e-4);
        EXPECT_LE(maxDifference(steps.values, ref.values), 1e-4);
        EXPECT_LE(maxDifference(steps.scores, ref.scores), 1e-4);
        const double dw = maxDifference(steps.weights, ref.weights);
        const double dout = maxDifference(steps.output, ref.output);
        EXPECT_LE(dw, kTolerance);
        EXPECT_LE(dout, kTolerance);
        worst = std::max({worst, dw, dout});
        const auto projection = reference.runThroughOutputProjection(ids, head, position);
        const double dshare = maxDifference(steps.head_contribution, projection.head_contribution);
        const double dprojected = maxDifference(steps.projected, projection.projected);
        EXPECT_LE(dshare, kTolerance);
        EXPECT_LE(dprojected, kTolerance);
        worst_projection = std::max({worst_projection, dshare, dprojected});
      }
    }
  }
  std::printf("max |steps - independent recomputation| (weights, output): %.3g; through o_proj: %.3g\n", worst,
              worst_projection);
}

// Through o_proj: each head's share of the projection, summed over every
// head's own explanation plus the bias, is the forward's attention output
// after o_proj; the explanation's own check agrees.
TEST(AttentionSteps, HeadSharesThroughOutputProjectionSumToTheForwardsOutput) {
  double worst_sum = 0, worst_check = 0;
  for (const std::string& name : kModels) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    const ModelConfig& c = model->config();
    const auto ids = prompt(*model, 24, 7);
    ForwardAttention forward;
    forward.record(*model, ids);
    for (int64_t layer = 0; layer < c.num_layers; ++layer) {
      for (int64_t position : {int64_t{0}, int64_t{13}, int64_t{23}}) {
        SCOPED_TRACE("layer " + std::to_string(layer) + " position " + std::to_string(position));
        const auto model_projected = forward.projected.at(layer)[position];  // [hidden]
        at::Tensor sum;
        for (int64_t head = 0; head < c.num_heads; ++head) {
          const AttentionSteps steps = attentionSteps(*model, ids, {layer, head, position});
          ASSERT_EQ(steps.o_proj_slice.sizes().vec(), (std::vector<int64_t>{c.hidden_size, c.head_dim}));
          ASSERT_EQ(steps.head_contribution.size(0), c.hidden_size);
          EXPECT_TRUE(torch::equal(steps.projected, model_projected));
          EXPECT_LE(steps.projection_difference, kTolerance);
          worst_check = std::max(worst_check, steps.projection_difference);
          sum = head == 0 ? steps.o_proj_bias + steps.head_contribution : sum + steps.head_contribution;
        }
        const double d = maxAbs(sum - model_projected);
        EXPECT_LE(d, kTolerance);
        worst_sum = std::max(worst_sum, d);
      }
    }
  }
  std::printf("max |sum of head shares + bias - forward after o_proj|: %.3g, max projection_difference: %.3g\n",
              worst_sum, worst_check);
}

TEST(AttentionSteps, Gpt2OutputProjectionHasABiasLlamaHasNone) {
  const auto gpt2 = fixtureModel("gpt2-tiny");
  const AttentionSteps g = attentionSteps(*gpt2, prompt(*gpt2, 6, 2), {1, 0, 5});
  EXPECT_GT(maxAbs(g.o_proj_bias), 0.0);
  const auto llama = fixtureModel("llama-tiny");
  const AttentionSteps l = attentionSteps(*llama, prompt(*llama, 6, 2), {1, 0, 5});
  EXPECT_EQ(maxAbs(l.o_proj_bias), 0.0);
}

TEST(AttentionSteps, RotaryStepTurnsEachChannelPairByTheStatedAngle) {
  for (const std::string& name : {"llama-tiny", "qwen3-tiny", "gemma2-tiny", "phi3-tiny", "phi3-longrope-tiny"}) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    // 40 tokens take phi3-longrope past original_max_position_embeddings (32): long factors.
    const auto ids = prompt(*model, 40, 3);
    const AttentionSteps steps = attentionSteps(*model, ids, {1, 2, 37});
    ASSERT_TRUE(steps.rotary.has_value());
    EXPECT_LE(maxAbs(steps.rotary->angle - 37 * steps.rotary->theta), 1e-4 * 37);
    EXPECT_LE(maxAbs(rotated(steps.q_before_rope, steps.rotary->angle, steps.rotary->magnitude) - steps.q), 1e-5);
    for (int64_t j : {0, 5, 37}) {
      const auto angle = steps.rotary->theta * static_cast<double>(j);
      EXPECT_LE(maxAbs(rotated(steps.keys_before_rope[j], angle, steps.rotary->magnitude) - steps.keys[j]), 1e-4)
          << "key row " << j;
    }
    EXPECT_EQ(steps.rotary->magnitude != 1.0, name == "phi3-longrope-tiny");
  }
}

TEST(AttentionSteps, Gpt2HasNoRotaryStep) {
  const auto model = fixtureModel("gpt2-tiny");
  const AttentionSteps steps = attentionSteps(*model, prompt(*model, 8, 1), {1, 3, 6});
  EXPECT_FALSE(steps.rotary.has_value());
  EXPECT_TRUE(torch::equal(steps.q_before_rope, steps.q));
  EXPECT_TRUE(torch::equal(steps.keys_before_rope, steps.keys));
  EXPECT_EQ(steps.kv_head, 3);
  EXPECT_EQ(steps.query_heads_sharing, std::vector<int64_t>{3});
}

TEST(AttentionSteps, GroupedQueryHeadsShareTheirKeysAndValues) {
  const auto model = fixtureModel("llama-tiny");  // 4 query heads over 2 kv heads
  const auto ids = prompt(*model, 12, 5);
  const AttentionSteps head2 = attentionSteps(*model, ids, {1, 2, 11});
  const AttentionSteps head3 = attentionSteps(*model, ids, {1, 3, 11});
  const AttentionSteps head1 = attentionSteps(*model, ids, {1, 1, 11});
  EXPECT_EQ(head3.kv_head, 1);
  EXPECT_EQ(head3.query_heads_sharing, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(head1.kv_head, 0);
  EXPECT_TRUE(torch::equal(head2.keys, head3.keys));
  EXPECT_TRUE(torch::equal(head2.values, head3.values));
  EXPECT_FALSE(torch::equal(head1.keys, head3.keys));
  EXPECT_FALSE(torch::equal(head2.q, head3.q));
}

TEST(AttentionSteps, Gemma2ShowsItsScaleSoftCapAndWindow) {
  const auto model = fixtureModel("gemma2-tiny");  // query_pre_attn_scalar 24, soft-cap 6, window 8 on even layers
  const auto ids = prompt(*model, 16, 9);
  const AttentionSteps sliding = attentionSteps(*model, ids, {0, 1, 14});
  EXPECT_NEAR(sliding.scale, 1.0 / std::sqrt(24.0), 1e-12);
  EXPECT_EQ(sliding.softcap, 6.0);
  EXPECT_EQ(sliding.window, 8);
  EXPECT_LE(maxAbs(sliding.capped - 6.0 * (sliding.scaled / 6.0).tanh()), 1e-6);
  EXPECT_EQ(sliding.visible.sum().item<int64_t>(), 8);
  EXPECT_FALSE(sliding.visible[6].item<bool>());
  EXPECT_TRUE(sliding.visible[7].item<bool>());
  EXPECT_EQ(maxAbs(sliding.weights.narrow(0, 0, 7)), 0.0);
  EXPECT_TRUE(std::isinf(sliding.masked[0].item<float>()));
  const AttentionSteps global = attentionSteps(*model, ids, {1, 1, 14});
  EXPECT_EQ(global.window, 0);
  EXPECT_EQ(global.visible.sum().item<int64_t>(), 15);
}

TEST(AttentionSteps, BadLayerHeadOrPositionIsNamedWithItsRange) {
  const auto model = fixtureModel("llama-tiny");  // 2 layers, 4 heads
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5};
  auto message = [&](const AttentionQuery& q) {
    try {
      attentionSteps(*model, ids, q);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({2, 0, 0}), "layer 2 is out of range: the model has 2 layers (valid: 0-1)");
  EXPECT_EQ(message({0, -1, 0}), "head -1 is out of range: the model has 4 query heads (valid: 0-3)");
  EXPECT_EQ(message({0, 0, 5}), "position 5 is out of range: the prompt has 5 tokens (valid: 0-4)");
}

}  // namespace
}  // namespace kvscope
