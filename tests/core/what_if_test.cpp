// "What if these cache entries were gone" (core/explain/what_if.h) against a
// forward over a cache this test builds itself, with the rows really absent
// (or the elements really zeroed), and against the arithmetic of attention:
// removing keys renormalises the remaining weights; zeroing V channels moves
// only those channels of the output.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/explain/what_if.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

constexpr double kTolerance = 1e-5;

double maxAbs(const at::Tensor& t) { return t.numel() == 0 ? 0.0 : t.abs().max().item<double>(); }

std::vector<int64_t> prompt(const CausalLM& model, int64_t length, uint64_t seed) {
  return randomPrompts(1, model.config().vocab_size, length, length, seed)[0];
}

// Logits at P of a forward over a cache of positions 0..P-1 built here:
// windowed layers keep only the rows the query can still see (as a session
// evicts them), layer L loses `removed`, and `edit_rows` may change layer L's
// rows in place before the query reads them.
at::Tensor logitsWithout(const CausalLM& model, const std::vector<int64_t>& ids, const AttentionQuery& q,
                         const std::set<int64_t>& removed,
                         const std::function<void(at::Tensor& keys, at::Tensor& values)>& edit_rows = {}) {
  c10::InferenceMode guard;
  const int64_t P = q.position;
  auto full = model.makeCache();
  model.forward(torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + P), torch::kInt64), 0, full.get());
  auto cache = model.makeCache();
  for (int64_t layer = 0; layer < model.config().num_layers; ++layer) {
    const int64_t window = model.config().windowOf(layer);
    std::vector<int64_t> rows;
    for (int64_t p = window > 0 ? std::max<int64_t>(0, P - window + 1) : 0; p < P; ++p) {
      if (layer != q.layer || removed.count(p) == 0) rows.push_back(p);
    }
    const auto index = torch::tensor(rows, torch::kInt64);
    auto keys = full->keys(layer).index_select(1, index).clone();      // [kv_heads, rows, D]
    auto values = full->values(layer).index_select(1, index).clone();  // [kv_heads, rows, D]
    if (layer == q.layer && edit_rows) edit_rows(keys, values);
    cache->append(layer, keys, values);
  }
  const auto token = torch::tensor(std::vector<int64_t>{ids[P]}, torch::kInt64);
  return model.forwardUnchecked(token, P, cache.get())[0];  // [vocab]
}

at::Tensor uncachedLogitsAt(const CausalLM& model, const std::vector<int64_t>& ids, int64_t position) {
  c10::InferenceMode guard;
  return model.forward(torch::tensor(ids, torch::kInt64), 0, nullptr)[position];
}

TEST(WhatIf, RemovedRowsEqualAForwardWithoutThem) {
  double worst_logits = 0, worst_weights = 0;
  for (const std::string& name : {"gpt2-tiny", "llama-tiny", "gemma2-tiny", "mistral-sw-tiny", "qwen3-tiny"}) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    const auto ids = prompt(*model, 22, 13);
    for (int64_t layer = 0; layer < model->config().num_layers; ++layer) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      const AttentionQuery q{layer, 3, 20};
      CacheEdit edit;
      edit.remove_positions = {2, 14, 17, 19};  // 2 is outside the 8- and 16-row windows
      const WhatIf w = whatIf(*model, ids, q, edit);
      const auto really_absent = logitsWithout(*model, ids, q, {2, 14, 17, 19});
      const double dl = maxAbs(w.logits_after - really_absent);
      EXPECT_LE(dl, kTolerance);
      EXPECT_LE(maxAbs(w.logits_before - uncachedLogitsAt(*model, ids, 20)), 1e-4);
      EXPECT_GT(w.kl, 0.0);
      EXPECT_GT(w.max_logit_difference, 1e-4) << "removing four rows changed nothing";

      // The head's remaining weights are its old weights renormalised.
      auto kept = w.weights_before.clone();
      for (int64_t p : edit.remove_positions) kept[p] = 0;
      const double dw = maxAbs(w.weights_after - kept / kept.sum());
      EXPECT_LE(dw, kTolerance);
      for (int64_t p : edit.remove_positions) EXPECT_TRUE(w.removed[p].item<bool>());
      EXPECT_EQ(w.removed.sum().item<int64_t>(), 4);
      worst_logits = std::max(worst_logits, dl);
      worst_weights = std::max(worst_weights, dw);
    }
  }
  std::printf("max |what-if logits - forward with the rows absent|: %.3g, max |weights - renormalised|: %.3g\n",
              worst_logits, worst_weights);
}

TEST(WhatIf, OutputAfterRemovalIsTheRenormalisedSumOfTheRemainingValues) {
  const auto model = fixtureModel("llama-tiny");
  const auto ids = prompt(*model, 12, 21);
  const AttentionQuery q{1, 2, 10};
  CacheEdit edit;
  edit.remove_positions = {0, 4};
  const WhatIf w = whatIf(*model, ids, q, edit);
  const AttentionSteps steps = attentionSteps(*model, ids, q);
  const auto expected = torch::mv(steps.values.t(), w.weights_after);  // [D]
  EXPECT_LE(maxAbs(w.output_after - expected), kTolerance);
  EXPECT_LE(maxAbs(w.weights_before - steps.weights), kTolerance);
  EXPECT_LE(maxAbs(w.output_before - steps.output), kTolerance);
}

TEST(WhatIf, NoEditChangesNothing) {
  const auto llama = fixtureModel("llama-tiny");
  const WhatIf same = whatIf(*llama, prompt(*llama, 14, 2), {0, 1, 12}, CacheEdit{});
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_TRUE(torch::equal(same.logits_before, same.logits_after));
  EXPECT_TRUE(torch::equal(same.weights_before, same.weights_after));
  EXPECT_EQ(same.top1_before, same.top1_after);
  // A sliding layer's edited cache drops the rows outside the window, which
  // the untouched one only masks: equal up to float summation order.
  const auto gemma = fixtureModel("gemma2-tiny");
  const WhatIf windowed = whatIf(*gemma, prompt(*gemma, 14, 2), {0, 1, 12}, CacheEdit{});
  EXPECT_LE(windowed.kl, 1e-10);
  EXPECT_LE(maxAbs(windowed.logits_before - windowed.logits_after), kTolerance);
  EXPECT_LE(maxAbs(windowed.weights_before - windowed.weights_after), kTolerance);
}

TEST(WhatIf, ZeroedKeyChannelsEqualAnEditedCacheAndTheEditedScores) {
  const auto model = fixtureModel("llama-tiny");
  const auto ids = prompt(*model, 16, 4);
  const AttentionQuery q{0, 3, 15};  // kv head 1
  CacheEdit edit;
  edit.zero_key_channels = {0, 5, 9};
  edit.zero_positions = {3, 8, 14};
  const WhatIf w = whatIf(*model, ids, q, edit);
  const auto really_zeroed = logitsWithout(*model, ids, q, {}, [&](at::Tensor& keys, at::Tensor&) {
    for (int64_t p : edit.zero_positions) {
      for (int64_t c : edit.zero_key_channels) keys[1][p][c] = 0;
    }
  });
  EXPECT_LE(maxAbs(w.logits_after - really_zeroed), kTolerance);
  EXPECT_GT(w.kl, 0.0);

  // Each zeroed row loses q_c k_jc of its score.
  const AttentionSteps steps = attentionSteps(*model, ids, q);
  auto scores = steps.scores.clone();
  for (int64_t p : edit.zero_positions) {
    for (int64_t c : edit.zero_key_channels) scores[p] -= steps.q[c] * steps.keys[p][c];
  }
  EXPECT_LE(maxAbs(w.weights_after - torch::softmax(scores * steps.scale, 0)), kTolerance);
}

TEST(WhatIf, ZeroedValueChannelsKeepTheWeightsAndMoveOnlyThoseChannels) {
  const auto model = fixtureModel("gemma2-tiny");
  const auto ids = prompt(*model, 12, 8);
  const AttentionQuery q{1, 0, 11};  // a global layer: every earlier row is visible
  CacheEdit edit;
  edit.zero_value_channels = {2, 7};  // every earlier row
  const WhatIf w = whatIf(*model, ids, q, edit);
  const AttentionSteps steps = attentionSteps(*model, ids, q);
  EXPECT_LE(maxAbs(w.weights_after - w.weights_before), kTolerance);
  auto expected = w.output_before.clone();
  for (int64_t c : edit.zero_value_channels) {
    for (int64_t j = 0; j < 11; ++j) expected[c] -= w.weights_before[j] * steps.values[j][c];
  }
  EXPECT_LE(maxAbs(w.output_after - expected), kTolerance);
  const auto really_zeroed = logitsWithout(*model, ids, q, {}, [&](at::Tensor&, at::Tensor& values) {
    for (int64_t c : edit.zero_value_channels) values.select(2, c).select(0, 0).zero_();
  });
  EXPECT_LE(maxAbs(w.logits_after - really_zeroed), kTolerance);
}

TEST(WhatIf, ElementScoresAreMagnitudeTimesQueryOrWeight) {
  const auto model = fixtureModel("llama-tiny");
  const auto ids = prompt(*model, 9, 6);
  const AttentionSteps steps = attentionSteps(*model, ids, {1, 0, 8});
  const ElementScores scores = elementScores(steps);
  ASSERT_EQ(scores.keys.sizes(), steps.keys.sizes());
  ASSERT_EQ(scores.values.sizes(), steps.values.sizes());
  for (int64_t j : {0, 4, 8}) {
    for (int64_t c : {0, 7, 15}) {
      EXPECT_FLOAT_EQ(scores.keys[j][c].item<float>(), std::abs(steps.keys[j][c].item<float>() * steps.q[c].item<float>()));
      EXPECT_FLOAT_EQ(scores.values[j][c].item<float>(),
                      std::abs(steps.values[j][c].item<float>()) * steps.weights[j].item<float>());
    }
  }
  // |output_c| <= sum_j w_j |v_jc|: the V scores bound what each channel can lose.
  EXPECT_TRUE((steps.output.abs() <= scores.values.sum(0) + 1e-6).all().item<bool>());
}

TEST(WhatIf, BadEditsAreNamedWithTheirRange) {
  const auto model = fixtureModel("llama-tiny");  // head_dim 16
  const std::vector<int64_t> ids = {5, 6, 7, 8, 9, 10};
  auto message = [&](const CacheEdit& edit, int64_t position) {
    try {
      whatIf(*model, ids, {0, 0, position}, edit);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CacheEdit own_row;
  own_row.remove_positions = {5};
  EXPECT_NE(message(own_row, 5).find("valid: 0-4"), std::string::npos) << message(own_row, 5);
  CacheEdit channel;
  channel.zero_key_channels = {16};
  EXPECT_EQ(message(channel, 5), "what-if: K channel 16 is out of range (valid: 0-15)");
  CacheEdit first;
  first.remove_positions = {0};
  EXPECT_NE(message(first, 0).find("position 0 reads only its own row"), std::string::npos);
}

TEST(WhatIf, LongropeRefusesAPositionWhereCachedAndPrefillRotationsDiffer) {
  const auto model = fixtureModel("phi3-longrope-tiny");  // switches factors past 32 positions
  const auto ids = prompt(*model, 40, 5);
  CacheEdit edit;
  edit.remove_positions = {1};
  EXPECT_THROW(whatIf(*model, ids, {0, 0, 10}, edit), Error);  // the 40-token prefill uses the long factors
  const WhatIf w = whatIf(*model, ids, {0, 0, 36}, edit);      // long factors on both sides
  EXPECT_LE(maxAbs(w.logits_before - uncachedLogitsAt(*model, std::vector<int64_t>(ids.begin(), ids.begin() + 37), 36)),
            1e-4);
}

}  // namespace
}  // namespace kvscope
