// forward(..., logit_rows): the head runs on the last rows only, and what it
// returns equals those rows of the full forward; the cache fills the same.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;

class LogitRowsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LogitRowsTest, LastRowsEqualTheFullForwardsAndTheCacheIsTheSame) {
  c10::InferenceMode guard;
  const auto model = fixtureModel(GetParam());
  const auto ids = torch::tensor(std::vector<int64_t>{3, 17, 5, 29, 11, 8, 40}, torch::kInt64);
  const at::Tensor full = model->forward(ids, 0, nullptr);  // [7, vocab]
  for (int64_t rows : {1, 3, 7, 9}) {
    const at::Tensor last = model->forward(ids, 0, nullptr, nullptr, rows);
    const int64_t expected = std::min<int64_t>(rows, 7);
    ASSERT_EQ(last.size(0), expected) << rows;
    EXPECT_LT((last - full.narrow(0, 7 - expected, expected)).abs().max().item<double>(), 1e-5) << rows;
  }
  // A prefill that asks for no logits still writes every row of the cache.
  auto cache = model->makeCache();
  auto reference = model->makeCache();
  EXPECT_EQ(model->forward(ids, 0, cache.get(), nullptr, 0).size(0), 0);
  model->forward(ids, 0, reference.get());
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
    ASSERT_EQ(cache->length(layer), reference->length(layer));
    EXPECT_TRUE(torch::equal(cache->keys(layer), reference->keys(layer))) << layer;
    EXPECT_TRUE(torch::equal(cache->values(layer), reference->values(layer))) << layer;
  }
  const auto next = torch::tensor(std::vector<int64_t>{12}, torch::kInt64);
  EXPECT_LT((model->forward(next, 7, cache.get()) - model->forward(next, 7, reference.get())).abs().max().item<double>(),
            1e-6);
}

INSTANTIATE_TEST_SUITE_P(Models, LogitRowsTest, ::testing::Values("llama-tiny", "gpt2-tiny", "gemma2-tiny", "phi3-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace kvscope
