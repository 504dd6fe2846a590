// The confidence stop (SessionOptions::draft_confidence, Hugging Face's
// assistant_confidence_threshold): a round's drafting stops after the first
// draft the drafter gave a probability below the threshold, that draft still
// proposed; the drafts before it, their probabilities and logits are those of
// a draft without the stop; and greedy sessions still emit the target's own
// tokens while drafting fewer.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <fstream>

#include "core/model/model_bundle.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

constexpr int64_t kVocab = 8;

// Logits whose argmax is (stream length) mod vocab, sure of it except at
// lengths 2 mod 3, where a second token is nearly as likely.
at::Tensor shapedLogits(const std::vector<int64_t>& stream) {
  const auto length = static_cast<int64_t>(stream.size());
  auto logits = torch::zeros({kVocab});
  logits[length % kVocab] = 6.0;
  if (length % 3 == 2) logits[(length + 1) % kVocab] = 5.9;
  return logits;
}

double probabilityOfTop(const std::vector<int64_t>& stream) {
  const auto probs = shapedLogits(stream).to(torch::kFloat64).softmax(0);
  return probs.max().item<double>();
}

Draft draftWith(const ModelDrafter& drafter, const std::vector<int64_t>& sequence, int64_t gamma,
                const SamplingSettings& sampling, double stop_below, uint64_t seed, int* feeds) {
  auto generator = makeGenerator(seed);
  const std::vector<int64_t> eos;
  DraftRequest request{sequence, gamma, sampling, generator, eos, true, kVocab, [feeds](const std::vector<int64_t>& s) {
                         ++*feeds;
                         return shapedLogits(s);
                       }};
  request.stop_below = stop_below;
  return drafter.draft(request);
}

TEST(DraftConfidence, DraftingStopsAfterTheFirstUnsureDraftAndProposesIt) {
  const ModelDrafter drafter(fixtureModel("llama-tiny-draft"), "d");
  const std::vector<int64_t> sequence = {1, 2, 3};  // lengths 3, 4, 5, ...: 5 is the first unsure one
  const double unsure = probabilityOfTop({0, 0, 0, 0, 0});
  const double sure = probabilityOfTop({0, 0, 0});
  ASSERT_LT(unsure, 0.6);
  ASSERT_GT(sure, 0.9);
  int feeds = 0;
  const Draft cut = draftWith(drafter, sequence, 6, SamplingSettings{}, 0.6, 1, &feeds);
  EXPECT_EQ(cut.tokens, (std::vector<int64_t>{3, 4, 5}));  // the third, unsure, draft is the last
  EXPECT_EQ(feeds, 3);                                     // no drafter step after it
  ASSERT_EQ(cut.q_of_picks.size(), 3u);
  EXPECT_GE(cut.q_of_picks[0], 0.6);
  EXPECT_GE(cut.q_of_picks[1], 0.6);
  EXPECT_NEAR(cut.q_of_picks[2], unsure, 1e-6);
  EXPECT_EQ(cut.logits.sizes(), (std::vector<int64_t>{3, kVocab}));

  // Below the unsure probability, nothing stops the draft.
  feeds = 0;
  EXPECT_EQ(draftWith(drafter, sequence, 6, SamplingSettings{}, unsure - 1e-3, 1, &feeds).tokens.size(), 6u);
  EXPECT_EQ(feeds, 6);
}

TEST(DraftConfidence, TheDraftsBeforeTheStopAreThoseOfTheUncutDraft) {
  const ModelDrafter drafter(fixtureModel("llama-tiny-draft"), "d");
  const std::vector<int64_t> sequence = {4, 4, 4, 4};  // length 5 (unsure) after the first draft
  int feeds = 0;
  const Draft full = draftWith(drafter, sequence, 5, SamplingSettings{}, 0.0, 1, &feeds);
  const Draft cut = draftWith(drafter, sequence, 5, SamplingSettings{}, 0.6, 1, &feeds);
  ASSERT_EQ(cut.tokens.size(), 2u);
  ASSERT_EQ(full.tokens.size(), 5u);
  for (size_t i = 0; i < cut.tokens.size(); ++i) {
    EXPECT_EQ(cut.tokens[i], full.tokens[i]) << i;
    // Computed in the loop for the stop, after it without: the same bits.
    EXPECT_EQ(cut.q_of_picks[i], full.q_of_picks[i]) << i;
  }
  EXPECT_TRUE(torch::equal(cut.logits, full.logits.narrow(0, 0, 2)));
}

TEST(DraftConfidence, SampledDraftsStopOnTheirProcessedProbability) {
  const ModelDrafter drafter(fixtureModel("llama-tiny-draft"), "d");
  const SamplingSettings sampling = sampledSettings(0.7, 2);  // top-2 of the shaped logits
  const std::vector<int64_t> sequence = {1, 2, 3};
  int feeds = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const Draft full = draftWith(drafter, sequence, 6, sampling, 0.0, seed, &feeds);
    const Draft cut = draftWith(drafter, sequence, 6, sampling, 0.75, seed, &feeds);
    ASSERT_FALSE(cut.tokens.empty());
    ASSERT_LE(cut.tokens.size(), full.tokens.size());
    for (size_t i = 0; i < cut.tokens.size(); ++i) {
      EXPECT_EQ(cut.tokens[i], full.tokens[i]) << "seed " << seed << " draft " << i;
      EXPECT_EQ(cut.q_of_picks[i], full.q_of_picks[i]) << "seed " << seed << " draft " << i;
      // q_of_picks is the processed distribution's probability: the one the stop reads.
      EXPECT_DOUBLE_EQ(cut.q_of_picks[i], cut.q[static_cast<int64_t>(i)][cut.tokens[i]].item<double>());
      const bool last = i + 1 == cut.tokens.size();
      if (!last) EXPECT_GE(cut.q_of_picks[i], 0.75) << "seed " << seed << " draft " << i;
    }
    if (cut.tokens.size() < 6) EXPECT_LT(cut.q_of_picks.back(), 0.75) << "seed " << seed;
    EXPECT_EQ(cut.q.size(0), static_cast<int64_t>(cut.tokens.size()));
  }
}

// Speculative decoding with the stop is still exact: greedy sessions emit
// the greedy target-only tokens, at every threshold, while the stop really
// cuts rounds short (fewer drafts than without it).
TEST(DraftConfidence, GreedySessionsEmitTheTargetsTokensWithFewerDrafts) {
  // The bundled pair: a trained drafter is sure of some drafts and unsure of
  // others (a random fixture drafter is unsure of all of them).
  const ModelBundle bundle = loadModelBundle(bundledModelDirectory("target"), torch::kFloat32);
  const std::shared_ptr<const CausalLM> target = bundledModel("target");
  const auto drafter = std::make_shared<ModelDrafter>(bundledModel("fast-drafter"), "fast-drafter");
  std::ifstream lines(fs::path(bundledModelDirectory("target")).parent_path() / "heldout_prompts.txt");
  std::vector<std::vector<int64_t>> prompts;
  for (std::string line; std::getline(lines, line) && prompts.size() < 8;) {
    if (!line.empty()) prompts.push_back(bundle.tokenizer->encode(line));
  }
  ASSERT_EQ(prompts.size(), 8u);
  const std::vector<int64_t> eos = target->config().eos_token_ids;
  constexpr int64_t kGamma = 4, kMaxNew = 24;
  int64_t drafted_without_stop = 0;
  int ties = 0;
  for (double threshold : {0.0, 0.3, 0.6, 0.9}) {
    int64_t drafted = 0, short_rounds = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateOptions g;
      g.max_new_tokens = kMaxNew;
      g.ignore_eos = true;  // a round ends early only by the stop
      const auto reference = generateAutoregressive(*target, prompts[i], g, eos).ids;
      SessionOptions o = fastOptions(kGamma, kMaxNew, /*use_cache=*/true, greedySettings());
      o.draft_confidence = threshold;
      o.ignore_eos = true;
      Session session(target, drafter, prompts[i], o, eos);
      session.runToEnd();
      const std::string label = "threshold " + std::to_string(threshold) + ", prompt " + std::to_string(i);
      expectSameTokens(*target, prompts[i], reference, session.generated(), label, &ties);
      for (const RoundRecord& r : session.rounds()) {
        if (r.index == 0) continue;
        drafted += static_cast<int64_t>(r.drafts.size());
        if (static_cast<int64_t>(r.drafts.size()) < r.gamma) {
          ++short_rounds;
          // A round cut by the stop ends on its one unsure draft.
          ASSERT_FALSE(r.q_draft.empty()) << label;
          EXPECT_LT(r.q_draft.back(), threshold) << label << ", round " << r.index;
        }
      }
      expectLedgerMatchesCache(session, CacheRole::Drafter, label);
    }
    std::cout << "[ info ] threshold " << threshold << ": " << drafted << " drafts, " << short_rounds
              << " rounds cut short\n";
    if (threshold == 0.0) {
      EXPECT_EQ(short_rounds, 0);
      drafted_without_stop = drafted;
    } else {
      EXPECT_GT(short_rounds, 0) << "threshold " << threshold;
      EXPECT_LT(drafted, drafted_without_stop) << "threshold " << threshold;
    }
  }
  EXPECT_LE(ties, 1);
}

}  // namespace
}  // namespace kvscope
