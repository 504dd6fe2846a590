// Compressed-cache self-speculation (core/inspect/self_speculation.h): the
// output is exactly the target's greedy output whatever the drafting cache
// lost; an uncompressed self-draft is accepted throughout; compression costs
// acceptance.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/inspect/self_speculation.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;
using testing_support::randomPrompts;

std::vector<int64_t> greedy(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t max_new) {
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  return generateAutoregressive(model, prompt, options, {}).ids;
}

TEST(SelfSpeculation, OutputIsTheTargetsGreedyOutputForEveryPolicy) {
  const auto model = fixtureModel("llama-tiny");
  const auto prompt = randomPrompts(1, model->config().vocab_size, 30, 30, 8)[0];
  const auto expected = greedy(*model, prompt, 20);
  for (EvictionPolicy policy : allEvictionPolicies()) {
    for (int64_t gamma : {1, 4}) {
      const auto r = runSelfSpeculation(*model, prompt, CompressionSpec::evicting(policy, 0.25), gamma, 20);
      EXPECT_EQ(r.tokens, expected) << evictionPolicyName(policy) << " gamma " << gamma;
      EXPECT_GE(r.alpha, 0.0);
      EXPECT_LE(r.alpha, 1.0);
      EXPECT_LE(r.accepted, r.drafted);
    }
  }
}

TEST(SelfSpeculation, FullCacheDraftsAreAcceptedAndCompressionCostsAcceptance) {
  const auto model = fixtureModel("llama-tiny");
  const auto prompt = randomPrompts(1, model->config().vocab_size, 40, 40, 9)[0];
  const auto full = runSelfSpeculation(*model, prompt, {}, 4, 24);
  EXPECT_EQ(full.alpha, 1.0);
  EXPECT_EQ(full.rounds, 5);  // 4 drafts + 1 bonus per round: 24 tokens in 5 rounds
  const auto tiny = runSelfSpeculation(*model, prompt, CompressionSpec::evicting(EvictionPolicy::Streaming, 0.1), 4, 24);
  EXPECT_LT(tiny.alpha, 1.0);
  EXPECT_EQ(tiny.tokens, full.tokens);
}

TEST(SelfSpeculation, BadArgumentsAreErrors) {
  const auto model = fixtureModel("llama-tiny");
  EXPECT_THROW(runSelfSpeculation(*model, {5}, {}, 4, 4), Error);
  EXPECT_THROW(runSelfSpeculation(*model, {5, 6, 7}, {}, 0, 4), Error);
  EXPECT_THROW(runSelfSpeculation(*model, {5, 6, 7}, {}, 4, 0), Error);
}

}  // namespace
}  // namespace kvscope
