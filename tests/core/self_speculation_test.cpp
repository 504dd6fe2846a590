// Compressed-cache self-speculation (core/inspect/self_speculation.h): the
// output is exactly the target's greedy output whatever the drafting cache
// lost and however it holds it (masked, compacted, re-rotated); compacting
// changes no draft (the same alpha as the mask) but leaves the draft only
// the kept rows; an uncompressed self-draft is accepted throughout;
// compression costs acceptance; EOS stops as plain decoding does.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
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

SelfSpeculationResult speculateWith(const CausalLM& model, const std::vector<int64_t>& prompt,
                                    const CompressionSpec& spec, DraftCacheLayout layout, int64_t max_new) {
  SelfSpeculationOptions options;
  options.gamma = 3;
  options.max_new = max_new;
  options.layout = layout;
  return runSelfSpeculation(model, prompt, spec, options);
}

TEST(SelfSpeculation, EveryDraftCacheLayoutReproducesTheTarget) {
  for (const char* fixture : {"llama-tiny", "gpt2-tiny"}) {
    const auto model = fixtureModel(fixture);
    const bool rotary = model->config().arch != Architecture::Gpt2;
    const auto prompt = randomPrompts(1, model->config().vocab_size, 40, 40, 13)[0];
    const auto expected = greedy(*model, prompt, 24);
    for (EvictionPolicy policy : {EvictionPolicy::Streaming, EvictionPolicy::H2O, EvictionPolicy::Pyramid}) {
      const auto spec = CompressionSpec::evicting(policy, 0.25);
      const std::string what = std::string(fixture) + " " + evictionPolicyName(policy);
      const auto masked = speculateWith(*model, prompt, spec, DraftCacheLayout::Masked, 24);
      const auto compacted = speculateWith(*model, prompt, spec, DraftCacheLayout::Compacted, 24);
      EXPECT_EQ(masked.tokens, expected) << what;
      EXPECT_EQ(compacted.tokens, expected) << what;
      // The same drafts (attention agrees within 1e-5), over a quarter of the rows.
      EXPECT_EQ(compacted.accepted, masked.accepted) << what;
      EXPECT_EQ(masked.draft_rows, 39) << what;
      EXPECT_EQ(compacted.full_rows, 39) << what;
      EXPECT_LT(compacted.draft_rows, masked.draft_rows) << what;
      if (rotary) EXPECT_EQ(speculateWith(*model, prompt, spec, DraftCacheLayout::Rerotated, 24).tokens, expected) << what;
    }
  }
}

TEST(SelfSpeculation, StopsAfterTheFirstEos) {
  const auto model = fixtureModel("llama-tiny");
  const auto prompt = randomPrompts(1, model->config().vocab_size, 30, 30, 8)[0];
  const auto free_run = greedy(*model, prompt, 20);
  const int64_t eos = free_run[7];  // a token the target emits: made the EOS
  GenerateOptions plain;
  plain.max_new_tokens = 20;
  const auto expected = generateAutoregressive(*model, prompt, plain, {eos}).ids;
  SelfSpeculationOptions options;
  options.max_new = 20;
  options.eos_ids = {eos};
  const auto r = runSelfSpeculation(*model, prompt, CompressionSpec::evicting(EvictionPolicy::H2O, 0.5), options);
  EXPECT_EQ(r.tokens, expected);
  EXPECT_TRUE(r.stopped_at_eos);
  EXPECT_EQ(r.tokens.back(), eos);
  EXPECT_LE(r.tokens.size(), 8u);
}

TEST(SelfSpeculation, BadArgumentsAreErrors) {
  const auto model = fixtureModel("llama-tiny");
  EXPECT_THROW(runSelfSpeculation(*model, {5}, {}, 4, 4), Error);
  EXPECT_THROW(runSelfSpeculation(*model, {5, 6, 7}, {}, 0, 4), Error);
  EXPECT_THROW(runSelfSpeculation(*model, {5, 6, 7}, {}, 4, 0), Error);
}

}  // namespace
}  // namespace kvscope
