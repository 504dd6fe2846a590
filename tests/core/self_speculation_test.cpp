// Compressed-cache self-speculation (core/compress/self_speculation.h): the
// output is exactly the target's greedy output whatever the drafting cache
// lost and however it holds it (masked, compacted, re-rotated); compacting
// changes no draft (the same alpha as the mask) but leaves the draft only
// the kept rows; an uncompressed self-draft is accepted throughout;
// compression costs acceptance; EOS stops as plain decoding does.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "core/compress/self_speculation.h"
#include "core/compress/self_speculation_drafter.h"
#include "core/decode/autoregressive.h"
#include "core/model/scoring.h"
#include "core/error.h"
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


// What self-speculation drafted and accepted for fixed inputs, per drafting
// layout and compression: pinned (the numbers of the loop self-speculation
// ran before it ran on the session's) so that a change to the loop shows as a
// changed count, not only as a changed output.
struct PinnedCase {
  const char* fixture;
  const char* name;
  CompressionSpec spec;
  DraftCacheLayout layout;
  bool drafter;  // draft with llama-tiny-draft instead of the target
  int64_t rounds, drafted, accepted, draft_rows;
};

CompressionSpec pruningSpec(ElementScore score) {
  CompressionSpec spec;
  spec.pruning = PruneSettings{};
  spec.pruning->score = score;
  spec.pruning->k_sparsity = spec.pruning->v_sparsity = 0.5;
  spec.pruning->dense_window = 8;
  return spec;
}

TEST(SelfSpeculation, PinnedAcceptanceForFixedInputs) {
  using L = DraftCacheLayout;
  using P = EvictionPolicy;
  auto evicting = [](P policy, double budget) { return CompressionSpec::evicting(policy, budget); };
  auto demoting = evicting(P::Knorm, 0.25);
  demoting.eviction->demote_bits = 4;
  const std::vector<PinnedCase> cases = {
      {"llama-tiny", "h2o 25% masked", evicting(P::H2O, 0.25), L::Masked, false, 18, 54, 12, 39},
      {"llama-tiny", "h2o 25% compacted", evicting(P::H2O, 0.25), L::Compacted, false, 18, 54, 12, 10},
      {"llama-tiny", "h2o 25% rerotated", evicting(P::H2O, 0.25), L::Rerotated, false, 15, 45, 15, 10},
      {"llama-tiny", "streaming 50% masked", evicting(P::Streaming, 0.5), L::Masked, false, 11, 31, 19, 39},
      {"llama-tiny", "streaming 25% compacted", evicting(P::Streaming, 0.25), L::Compacted, false, 18, 54, 12, 10},
      {"llama-tiny", "streaming 25% rerotated", evicting(P::Streaming, 0.25), L::Rerotated, false, 18, 54, 12, 10},
      {"llama-tiny", "snapkv 50% compacted", evicting(P::SnapKV, 0.5), L::Compacted, false, 9, 27, 21, 20},
      {"llama-tiny", "tova 25% compacted", evicting(P::Tova, 0.25), L::Compacted, false, 25, 74, 5, 10},
      {"llama-tiny", "pyramid 25% rerotated", evicting(P::Pyramid, 0.25), L::Rerotated, false, 11, 33, 19, 19},
      {"llama-tiny", "knorm 25% demoted to 4 bits", demoting, L::Compacted, false, 9, 26, 22, 39},
      {"llama-tiny", "magnitude pruning", pruningSpec(ElementScore::Magnitude), L::Compacted, false, 9, 27, 21, 39},
      {"llama-tiny", "output-aware pruning", pruningSpec(ElementScore::OutputAware), L::Masked, false, 9, 27, 21, 39},
      {"llama-tiny", "full cache", {}, L::Compacted, false, 8, 23, 23, 39},
      {"llama-tiny", "llama-tiny-draft", {}, L::Compacted, true, 30, 87, 0, 39},
      {"gpt2-tiny", "h2o 25% compacted", evicting(P::H2O, 0.25), L::Compacted, false, 16, 46, 15, 10},
  };
  std::vector<int64_t> prompt;  // a repeating pattern: the tiny random models copy some of it
  for (int64_t i = 0; i < 40; ++i) prompt.push_back(std::vector<int64_t>{5, 9, 200, 31, 77}[static_cast<size_t>(i % 5)]);
  for (const PinnedCase& c : cases) {
    const auto model = fixtureModel(c.fixture);
    SelfSpeculationOptions options;
    options.gamma = 3;
    options.max_new = 30;
    options.layout = c.layout;
    const auto drafter = c.drafter ? fixtureModel("llama-tiny-draft") : nullptr;
    const auto r = runSelfSpeculation(*model, prompt, c.spec, options, drafter.get());
    const std::string what = std::string(c.fixture) + ", " + c.name;
    EXPECT_EQ(r.tokens, greedy(*model, prompt, 30)) << what;
    EXPECT_EQ(r.rounds, c.rounds) << what;
    EXPECT_EQ(r.drafted, c.drafted) << what;
    EXPECT_EQ(r.accepted, c.accepted) << what;
    EXPECT_EQ(r.draft_rows, c.draft_rows) << what;
  }
}

// The drafter of self-speculation is a drafter like any other: a Session runs
// it, its compression is one logged Evict event of the drafter's cache at the
// prefill, and every later operation on the compacted copy is logged too.
TEST(SelfSpeculation, TheCompressedCacheDrafterRunsInASessionThatLogsItsCache) {
  const auto model = fixtureModel("llama-tiny");
  const auto prompt = randomPrompts(1, model->config().vocab_size, 40, 40, 13)[0];
  const auto drafter = std::make_shared<CompressedCacheDrafter>(
      model, CompressionSpec::evicting(EvictionPolicy::H2O, 0.25), DraftCacheLayout::Compacted, "target");
  EXPECT_EQ(drafter->type(), DrafterType::CompressedCache);
  EXPECT_EQ(drafter->model(), model.get());
  SessionOptions options;
  options.gamma = 3;
  options.max_new_tokens = 20;
  options.ignore_eos = true;
  Session session(model, drafter, prompt, options, {});
  session.runToEnd();
  EXPECT_EQ(session.generated(), greedy(*model, prompt, 20));

  int64_t compressions = 0, drafter_crops = 0, drafter_writes = 0;
  for (const CacheEvent& e : session.events().events()) {
    if (e.cache != CacheRole::Drafter) continue;
    if (e.kind == CacheEventKind::Evict) {
      ++compressions;
      EXPECT_EQ(e.policy, "h2o");
      EXPECT_EQ(e.phase, Phase::Prefill);
      EXPECT_FALSE(e.masked.empty());
      EXPECT_EQ(e.rows_after, e.rows_before);  // the layout keeps every row, masked
    }
    drafter_crops += e.kind == CacheEventKind::Crop;
    drafter_writes += e.kind == CacheEventKind::Append;
  }
  EXPECT_EQ(compressions, 1);
  EXPECT_GT(drafter_crops, 0);
  EXPECT_GT(drafter_writes, 1);
  // The compacted copy holds the kept rows only; the books count every position.
  const int64_t believed = static_cast<int64_t>(session.believedCacheTokens(CacheRole::Drafter).size());
  EXPECT_LT(session.drafterCache()->length(0), believed);
  EXPECT_EQ(session.drafterCache()->endPosition(0), believed);

  options.use_cache = false;
  EXPECT_THROW(Session(model, drafter, prompt, options, {}), Error);
}

// The drafter that is the target itself takes the target's prefill rows
// instead of running the same forward again: its cache must then hold what its
// own forward would have written, bit for bit, and log its own write.
TEST(SelfSpeculation, TheTargetAsDrafterTakesTheTargetsPrefillRowsBitForBit) {
  for (const std::string fixture : {"llama-tiny", "gpt2-tiny", "mistral-sw-tiny"}) {
    const auto model = fixtureModel(fixture);
    const auto prompt = randomPrompts(1, model->config().vocab_size, 30, 30, 17)[0];
    // No compression and a masked layout: after the prefill the copy's rows are as written.
    const auto drafter =
        std::make_shared<CompressedCacheDrafter>(model, CompressionSpec{}, DraftCacheLayout::Masked, "target");
    SessionOptions options;
    options.max_new_tokens = 8;
    options.ignore_eos = true;
    Session session(model, drafter, prompt, options, {});
    session.stepPhase();  // the prefill
    const std::vector<int64_t> prefix(prompt.begin(), prompt.end() - 1);
    auto own = model->makeCache(session.drafterCache()->storageDtype());
    model->forward(idsTensor(prefix), 0, own.get(), nullptr, 0);
    for (int64_t l = 0; l < own->numLayers(); ++l) {
      EXPECT_TRUE(at::equal(session.drafterCache()->keys(l), session.targetCache()->keys(l))) << fixture << " layer " << l;
      EXPECT_TRUE(at::equal(session.drafterCache()->values(l), session.targetCache()->values(l))) << fixture;
      if (model->config().windowOf(l) > 0) continue;  // the session's window already dropped the oldest rows
      EXPECT_TRUE(at::equal(session.drafterCache()->keys(l), own->keys(l))) << fixture << " layer " << l;
      EXPECT_TRUE(at::equal(session.drafterCache()->values(l), own->values(l))) << fixture << " layer " << l;
    }
    int64_t drafter_writes = 0;
    for (const CacheEvent& e : session.events().events()) {
      if (e.cache != CacheRole::Drafter || e.kind != CacheEventKind::Append) continue;
      ++drafter_writes;
      EXPECT_EQ(e.phase, Phase::Prefill);
    }
    EXPECT_EQ(drafter_writes, 1) << fixture;
    EXPECT_EQ(session.believedCacheTokens(CacheRole::Drafter), prefix) << fixture;
    // And the session goes on to the target's greedy output.
    session.runToEnd();
    EXPECT_EQ(session.generated(), greedy(*model, prompt, 8)) << fixture;
  }
}

}  // namespace
}  // namespace kvscope
