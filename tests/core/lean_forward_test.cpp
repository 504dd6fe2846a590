// The lean forward (core/model/llama_lean_forward.cpp) against the tensor
// path it replaces for up to 16 rows. Its products are the few-row kernel's
// in the same layout and order, so they are bit for bit dense()'s
// (DenseIntoIsDenseBitForBit); RMSNorm's sum, the activations and
// attention's softmax and sums round in another order, so the logits and the
// cache's K/V are not bit for bit the tensor path's. How far apart: within
// 2e-6 of the largest magnitude. That is float32's own rounding through the
// layers, not a loss of accuracy: against a float64 forward of the same
// weights the tensor path itself is up to 1.8e-6 off and the lean one no
// further (AsCloseToFloat64AsTheTensorPath). The lean forward records Key,
// Value and attention's weights and mask itself; a forward that records any
// other probe takes the tensor path: bit for bit today's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/bundled_models.h"
#include "core/model/causal_lm.h"
#include "core/model/dense.h"
#include "core/model/llama_model.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;

constexpr double kLeanRelative = 2e-6;

// Runs `body` with the lean forward switched as asked, and back on after.
template <typename Body>
auto withLean(bool enabled, Body body) {
  setLeanForwardEnabled(enabled);
  struct Restore {
    ~Restore() { setLeanForwardEnabled(true); }
  } restore;
  return body();
}

double relativeDifference(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  return (actual - expected).abs().max().item<double>() / std::max(scale, 1e-30);
}

// A prefill of `prompt` ids, then decode steps of one row and verify passes
// of 2..5 rows, each forward's logits kept; and the cache at the end.
struct ForwardRun {
  std::vector<at::Tensor> logits;
  std::unique_ptr<KvCache> cache;
};

ForwardRun decodeAndVerify(const CausalLM& model, int64_t prompt, uint64_t seed) {
  const int64_t vocab = model.config().vocab_size;
  const auto ids = testing_support::randomPrompts(1, vocab, prompt + 20, prompt + 20, seed).front();
  ForwardRun run;
  run.cache = model.makeCache();
  int64_t at = 0;
  auto feed = [&](int64_t n) {
    const auto tokens = torch::tensor(std::vector<int64_t>(ids.begin() + at, ids.begin() + at + n), torch::kInt64);
    run.logits.push_back(model.forward(tokens, at, run.cache.get()));
    at += n;
  };
  feed(prompt);
  for (int64_t n : {1, 1, 2, 3, 5, 1, 4}) feed(n);
  return run;
}

void expectLeanMatchesTensorPath(const CausalLM& model, const std::string& what) {
  c10::InferenceMode guard;
  for (int64_t prompt : {1, 7, 16}) {  // every forward within the lean path's 16 rows
    SCOPED_TRACE(what + ", prompt " + std::to_string(prompt));
    const ForwardRun lean = withLean(true, [&] { return decodeAndVerify(model, prompt, 31 + static_cast<uint64_t>(prompt)); });
    const ForwardRun tensor = withLean(false, [&] { return decodeAndVerify(model, prompt, 31 + static_cast<uint64_t>(prompt)); });
    ASSERT_EQ(lean.logits.size(), tensor.logits.size());
    for (size_t f = 0; f < lean.logits.size(); ++f) {
      ASSERT_EQ(lean.logits[f].sizes(), tensor.logits[f].sizes()) << "forward " << f;
      EXPECT_LE(relativeDifference(lean.logits[f], tensor.logits[f]), kLeanRelative) << "forward " << f;
      EXPECT_TRUE(torch::equal(lean.logits[f].argmax(1), tensor.logits[f].argmax(1))) << "forward " << f;
    }
    for (int64_t layer = 0; layer < model.config().num_layers; ++layer) {
      ASSERT_EQ(lean.cache->length(layer), tensor.cache->length(layer));
      EXPECT_LE(relativeDifference(lean.cache->keys(layer), tensor.cache->keys(layer)), kLeanRelative) << layer;
      EXPECT_LE(relativeDifference(lean.cache->values(layer), tensor.cache->values(layer)), kLeanRelative) << layer;
    }
  }
}

class LeanForwardFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(LeanForwardFamilies, LogitsAndCacheWithinFloat32RoundingOfTheTensorPath) {
  expectLeanMatchesTensorPath(*fixtureModel(GetParam()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Families, LeanForwardFamilies,
                         ::testing::Values("llama-tiny", "qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "phi3-tiny",
                                           "phi3-longrope-tiny", "mistral-sw-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// The bundled target as it loads: bf16 weights kept in 16 bits, every
// projection fused into panels; and widened to float32 (--weights fp32).
TEST(LeanForward, BundledTargetStoredAndWidened) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32);
  const std::string dir = bundledModelDirectory("target");
  expectLeanMatchesTensorPath(*loadCausalLM(dir, options, WeightResidency::Stored), "stored");
  expectLeanMatchesTensorPath(*loadCausalLM(dir, options, WeightResidency::Float32), "float32");
}

// Both paths against a float64 forward of the same weights (the bundled
// target widened, so the weights are the same numbers): the lean forward is
// within 2e-6 of it, as the tensor path is.
TEST(LeanForward, AsCloseToFloat64AsTheTensorPath) {
  c10::InferenceMode guard;
  const std::string dir = bundledModelDirectory("target");
  const auto f32 = loadCausalLM(dir, torch::TensorOptions().dtype(torch::kFloat32), WeightResidency::Float32);
  const auto f64 = loadCausalLM(dir, torch::TensorOptions().dtype(torch::kFloat64), WeightResidency::Float32);
  const ForwardRun reference = decodeAndVerify(*f64, 7, 5);
  const ForwardRun lean = withLean(true, [&] { return decodeAndVerify(*f32, 7, 5); });
  const ForwardRun tensor = withLean(false, [&] { return decodeAndVerify(*f32, 7, 5); });
  for (size_t f = 0; f < reference.logits.size(); ++f) {
    const at::Tensor expected = reference.logits[f].to(torch::kFloat32);
    EXPECT_LE(relativeDifference(lean.logits[f], expected), kLeanRelative) << "forward " << f;
    EXPECT_LE(relativeDifference(tensor.logits[f], expected), kLeanRelative) << "forward " << f;
  }
}

// A sink that wants a point the lean forward does not record (here the
// attention's output): the forward takes the tensor path, so its logits are
// bit for bit those of the lean forward switched off.
TEST(LeanForward, AForwardThatRecordsOtherPointsTakesTheTensorPath) {
  c10::InferenceMode guard;
  const auto model = fixtureModel("llama-tiny");
  const auto tokens = torch::tensor(std::vector<int64_t>{3, 17, 5, 29, 11}, torch::kInt64);
  struct Outputs : ProbeSink {
    bool wants(Probe p, int64_t) const override { return p == Probe::AttentionOutput; }
    void record(Probe, int64_t, const at::Tensor&) override { ++recorded; }
    int recorded = 0;
  } sink;
  const at::Tensor recorded = model->forward(tokens, 0, nullptr, &sink);
  EXPECT_EQ(sink.recorded, model->config().num_layers);
  const at::Tensor tensor_path = withLean(false, [&] { return model->forward(tokens, 0, nullptr); });
  EXPECT_TRUE(torch::equal(recorded, tensor_path));
}

// A traced session records every verify's attention weights and mask: the
// lean forward writes them itself. The mask is the tensor path's exactly;
// the weights are the ones the lean forward summed the values with, within
// float32 rounding of the tensor path's (0 where a key is hidden: the causal
// rule, a sliding window, soft-capped Gemma 2 scores, rows an eviction
// removed); and recording changes no logit.
// The two paths' q and k already differ by float32 rounding (kLeanRelative
// of their largest), and a weight moves with its scores: on the bundled
// target, whose attention is peaked, up to 2.7e-6 (2026-11-29). A weight
// computed wrongly (unnormalized, from the wrong key) is off by far more.
constexpr double kWeightsAbsolute = 1e-5;

void expectRecordedAttentionMatchesTensorPath(const CausalLM& model, const std::string& what) {
  c10::InferenceMode guard;
  const int64_t layers = model.config().num_layers, vocab = model.config().vocab_size;
  const auto ids = testing_support::randomPrompts(1, vocab, 40, 40, 7).front();
  struct Run {
    std::vector<at::Tensor> logits;
    std::vector<AttentionRecorder> recorders;
  };
  auto run = [&](bool lean, bool record) {
    return withLean(lean, [&] {
      Run out;
      auto cache = model.makeCache();
      int64_t at = 0;
      for (int64_t n : {12, 1, 3, 5, 2, 1}) {
        if (at == 13) {  // an eviction: every other row of the first 12 removed from kv head 0
          for (int64_t layer = 0; layer < layers; ++layer) {
            auto keep = torch::ones({model.config().num_kv_heads, cache->length(layer)}, torch::kBool);
            for (int64_t r = 1; r < 12; r += 2) keep[0][r] = false;
            cache->evictRows(layer, keep);
          }
        }
        out.recorders.emplace_back(layers);
        const auto tokens = torch::tensor(std::vector<int64_t>(ids.begin() + at, ids.begin() + at + n), torch::kInt64);
        out.logits.push_back(model.forward(tokens, at, cache.get(), record ? &out.recorders.back() : nullptr));
        at += n;
      }
      return out;
    });
  };
  const Run lean = run(true, true), tensor = run(false, true), unrecorded = run(true, false);
  for (size_t f = 0; f < lean.logits.size(); ++f) {
    SCOPED_TRACE(what + ", forward " + std::to_string(f));
    EXPECT_TRUE(torch::equal(lean.logits[f], unrecorded.logits[f]));  // recording changes nothing
    for (int64_t layer = 0; layer < layers; ++layer) {
      const at::Tensor& weights = lean.recorders[f].weights[static_cast<size_t>(layer)];
      const at::Tensor& expected = tensor.recorders[f].weights[static_cast<size_t>(layer)];
      ASSERT_TRUE(weights.defined()) << layer;
      ASSERT_EQ(weights.sizes(), expected.sizes()) << layer;
      EXPECT_LE((weights - expected).abs().max().item<double>(), kWeightsAbsolute) << layer;
      EXPECT_TRUE(torch::equal(weights == 0, expected == 0)) << layer;  // the same keys hidden
      EXPECT_TRUE(torch::equal(lean.recorders[f].masks[static_cast<size_t>(layer)],
                               tensor.recorders[f].masks[static_cast<size_t>(layer)]))
          << layer;
    }
  }
}

TEST_P(LeanForwardFamilies, RecordedAttentionIsTheTensorPaths) {
  expectRecordedAttentionMatchesTensorPath(*fixtureModel(GetParam()), GetParam());
}

TEST(LeanForward, RecordedAttentionOfTheBundledTargetIsTheTensorPaths) {
  expectRecordedAttentionMatchesTensorPath(
      *loadCausalLM(bundledModelDirectory("target"), torch::TensorOptions().dtype(torch::kFloat32)), "bundled target");
}

// The tracked cache's sink (Key and Value only) keeps the lean forward: the
// rows it is given are the rows the cache stored, and stay so after the
// workspace is reused.
TEST(LeanForward, KeyAndValueProbesRecordWhatTheCacheStored) {
  c10::InferenceMode guard;
  const auto model = fixtureModel("llama-tiny");
  struct KeysAndValues : ProbeSink {
    bool wants(Probe p, int64_t) const override { return p == Probe::Key || p == Probe::Value; }
    void record(Probe p, int64_t layer, const at::Tensor& value) override {
      (p == Probe::Key ? keys : values)[layer] = value;
    }
    std::map<int64_t, at::Tensor> keys, values;
  } sink;
  auto cache = model->makeCache();
  model->forward(torch::tensor(std::vector<int64_t>{3, 17, 5}, torch::kInt64), 0, cache.get());
  const auto tokens = torch::tensor(std::vector<int64_t>{29, 11}, torch::kInt64);
  const at::Tensor recorded = model->forward(tokens, 3, cache.get(), &sink);
  model->forward(torch::tensor(std::vector<int64_t>{8}, torch::kInt64), 5, cache.get());  // reuses the workspace
  for (int64_t layer = 0; layer < model->config().num_layers; ++layer) {
    EXPECT_TRUE(torch::equal(sink.keys.at(layer), cache->keys(layer).narrow(1, 3, 2))) << layer;
    EXPECT_TRUE(torch::equal(sink.values.at(layer), cache->values(layer).narrow(1, 3, 2))) << layer;
  }
  auto again = model->makeCache();
  model->forward(torch::tensor(std::vector<int64_t>{3, 17, 5}, torch::kInt64), 0, again.get());
  EXPECT_TRUE(torch::equal(recorded, model->forward(tokens, 3, again.get())));  // the lean forward both times
}

// More rows than the lean forward takes: the tensor path, bit for bit.
TEST(LeanForward, SeventeenRowsTakeTheTensorPath) {
  c10::InferenceMode guard;
  const auto model = fixtureModel("qwen2-tiny");
  const auto ids = testing_support::randomPrompts(1, model->config().vocab_size, 17, 17, 5).front();
  const auto tokens = torch::tensor(ids, torch::kInt64);
  const at::Tensor on = model->forward(tokens, 0, nullptr);
  const at::Tensor off = withLean(false, [&] { return model->forward(tokens, 0, nullptr); });
  EXPECT_TRUE(torch::equal(on, off));
}

// denseInto and denseRowsInto give dense() and denseRows() bit for bit, in
// every layout a weight is stored in, for 1..16 rows.
TEST(LeanForward, DenseIntoIsDenseBitForBit) {
  c10::InferenceMode guard;
  torch::manual_seed(11);
  const auto weight = torch::randn({96, 48});  // [out, in]
  const auto bias = torch::randn({96});
  std::vector<std::pair<std::string, at::Tensor>> layouts{
      {"row-major", weight},
      {"column-major", columnMajor(weight)},
      {"panels", packForInference(weight)},
      {"bf16 panels", packForInference(weight.to(torch::kBFloat16))}};
  for (const auto& [name, stored] : layouts) {
    for (int64_t rows : {1, 2, 5, 8, 9, 16}) {
      SCOPED_TRACE(name + ", " + std::to_string(rows) + " rows");
      const auto x = torch::randn({rows, 48});
      auto y = torch::empty({rows, 96});
      denseInto(x.data_ptr<float>(), rows, 48, stored, bias, y.data_ptr<float>());
      EXPECT_TRUE(torch::equal(y, dense(x, stored, bias)));
      const auto ids = torch::randint(0, 96, {rows}, torch::kInt64);
      auto gathered = torch::empty({rows, 48});
      denseRowsInto(stored, ids.data_ptr<int64_t>(), rows, gathered.data_ptr<float>());
      EXPECT_TRUE(torch::equal(gathered, denseRows(stored, ids)));
    }
  }
}

}  // namespace
}  // namespace kvscope
