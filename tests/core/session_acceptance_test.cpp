// The accept step on hand-made distributions: acceptGreedy's exact-match rule
// and acceptSampled's min(1, p/q) rule, residual and bonus token.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "chi_square.h"
#include "core/decode/drafter.h"
#include "core/decode/sampling.h"
#include "core/error.h"
#include "core/decode/speculative_acceptance.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::chiSquareTest;

at::Tensor rows(const std::vector<std::vector<float>>& values) {
  std::vector<at::Tensor> out;
  for (const auto& v : values) out.push_back(torch::tensor(v));
  return torch::stack(out);
}

// --- greedy ------------------------------------------------------------------

TEST(AcceptGreedy, AcceptsTheLongestMatchingPrefix) {
  // argmax per row: 2, 0, 3, 1
  const auto p = rows({{0.1f, 0.2f, 0.6f, 0.1f}, {0.7f, 0.1f, 0.1f, 0.1f}, {0.1f, 0.1f, 0.1f, 0.7f},
                       {0.1f, 0.6f, 0.2f, 0.1f}});
  auto r = acceptGreedy({2, 0, 1}, p);  // the third draft misses
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.next_token, 3);  // the correction is the target's choice there
  EXPECT_FALSE(r.bonus);
  EXPECT_TRUE(r.uniforms.empty());

  r = acceptGreedy({2, 0, 3}, p);  // all match: bonus from the last row
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.next_token, 1);
  EXPECT_TRUE(r.bonus);

  r = acceptGreedy({1, 0, 3}, p);  // the first misses: later matches do not count
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
  EXPECT_FALSE(r.bonus);

  r = acceptGreedy({}, p.narrow(0, 0, 1));  // nothing drafted: a plain target step, not a bonus (as in HF)
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
  EXPECT_FALSE(r.bonus);
}

TEST(AcceptGreedy, TiesGoToTheLowestId) {
  const auto p = rows({{0.4f, 0.4f, 0.2f}, {0.1f, 0.45f, 0.45f}});
  auto r = acceptGreedy({1}, p);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 0);
  r = acceptGreedy({0}, p);
  EXPECT_EQ(r.accepted, 1);
  EXPECT_EQ(r.next_token, 1);
}

// --- sampling ----------------------------------------------------------------

// [count, vocab] random distributions with every probability > 0.
at::Tensor randomDistributions(int64_t count, int64_t vocab, at::Generator& g) {
  auto x = torch::rand({count, vocab}, g) + 0.01;
  return x / x.sum(1, true);
}

TEST(AcceptSampled, QEqualToPAlwaysAccepts) {
  auto g = makeGenerator(1);
  for (int trial = 0; trial < 300; ++trial) {
    const auto p = randomDistributions(4, 7, g);  // [k + 1, vocab]
    const auto q = p.narrow(0, 0, 3).clone();     // q_i == p_i
    std::vector<int64_t> drafts;
    for (int i = 0; i < 3; ++i) drafts.push_back(sampleFrom(q[i], g));
    const auto r = acceptSampled(drafts, q, p, g);
    ASSERT_EQ(r.accepted, 3) << "trial " << trial;
    EXPECT_TRUE(r.bonus);
    EXPECT_EQ(r.uniforms.size(), 3u);
    EXPECT_GE(r.next_token, 0);
    EXPECT_LT(r.next_token, 7);
  }
}

TEST(AcceptSampled, OneHotDraftsAcceptWithProbabilityPAndNeverCorrectToTheDraft) {
  // The n-gram drafter's case: q one-hot at the draft.
  auto g = makeGenerator(2);
  const auto p = rows({{0.3f, 0.5f, 0.2f}, {0.2f, 0.2f, 0.6f}});
  const auto q = rows({{0.0f, 1.0f, 0.0f}});
  int accepted = 0;
  const int trials = 4000;
  for (int i = 0; i < trials; ++i) {
    const auto r = acceptSampled({1}, q, p, g);
    if (r.accepted == 1) {
      ++accepted;
      EXPECT_TRUE(r.bonus);
    } else {
      EXPECT_NE(r.next_token, 1);  // the residual p - q is 0 at the draft
      EXPECT_FALSE(r.bonus);
    }
  }
  // Accepted with probability p(1) = 0.5: 4000 draws, sd ~32.
  EXPECT_NEAR(accepted, trials / 2, 5 * 32);
}

TEST(AcceptSampled, ZeroTargetProbabilityAlwaysRejects) {
  auto g = makeGenerator(3);
  for (int trial = 0; trial < 500; ++trial) {
    auto p = randomDistributions(3, 6, g);
    const auto q = randomDistributions(2, 6, g);
    const int64_t d0 = sampleFrom(q[0], g);
    p[0][d0] = 0.0f;
    p[0] /= p[0].sum();
    const auto r = acceptSampled({d0, 0}, q, p, g);
    ASSERT_EQ(r.accepted, 0) << "trial " << trial;
    EXPECT_NE(r.next_token, d0);
    EXPECT_GT(p[0][r.next_token].item<float>(), 0.0f);
    EXPECT_FALSE(r.bonus);
    EXPECT_EQ(r.uniforms.size(), 1u);  // stops at the first rejection
  }
}

TEST(AcceptSampled, ZeroDrafterProbabilityRejects) {
  auto g = makeGenerator(4);
  const auto p = rows({{0.5f, 0.5f}, {0.5f, 0.5f}});
  const auto q = rows({{1.0f, 0.0f}});
  for (int i = 0; i < 50; ++i) {
    const auto r = acceptSampled({1}, q, p, g);
    EXPECT_EQ(r.accepted, 0);
    EXPECT_EQ(r.next_token, 1);  // residual max(0, p - q) = (0, 0.5)
  }
}

TEST(AcceptSampled, AcceptanceRateAndResidualFollowTheTheory) {
  // One draft: P(accept) = sum_x min(p(x), q(x)); after a rejection the
  // correction follows norm(max(0, p - q)).
  const std::vector<double> pv = {0.10, 0.40, 0.05, 0.25, 0.20};
  const std::vector<double> qv = {0.30, 0.10, 0.25, 0.25, 0.10};
  std::vector<float> pf(pv.begin(), pv.end()), qf(qv.begin(), qv.end());
  const auto p = rows({pf, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}});
  const auto q = rows({qf});
  double overlap = 0;
  std::vector<double> residual(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) {
    overlap += std::min(pv[i], qv[i]);
    residual[i] = std::max(0.0, pv[i] - qv[i]);
  }
  auto g = makeGenerator(5);
  const int trials = 20000;
  int accepted = 0;
  std::vector<int64_t> corrections(pv.size(), 0);
  for (int i = 0; i < trials; ++i) {
    const int64_t d = sampleFrom(q[0], g);
    const auto r = acceptSampled({d}, q, p, g);
    if (r.accepted == 1) {
      ++accepted;
    } else {
      ++corrections[r.next_token];
    }
  }
  const double sd = std::sqrt(trials * overlap * (1 - overlap));
  EXPECT_NEAR(accepted, trials * overlap, 4.5 * sd);
  const auto fit = chiSquareTest(residual, corrections);
  EXPECT_TRUE(fit.passes(0.001)) << fit.describe();
  EXPECT_EQ(fit.outside_support, 0);  // never a token where p <= q
}

TEST(AcceptSampled, NoDraftsIsAPlainTargetStep) {
  auto g = makeGenerator(8);
  const auto p = rows({{0.0f, 0.0f, 1.0f}});
  const auto r = acceptSampled({}, p.narrow(0, 0, 0), p, g);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
  EXPECT_FALSE(r.bonus);
  EXPECT_TRUE(r.uniforms.empty());
}

TEST(AcceptSampled, SameGeneratorSeedSameResult) {
  auto g0 = makeGenerator(6);
  const auto p = randomDistributions(5, 9, g0);
  const auto q = randomDistributions(4, 9, g0);
  const std::vector<int64_t> drafts = {1, 2, 3, 4};
  auto a = makeGenerator(77), b = makeGenerator(77);
  for (int i = 0; i < 20; ++i) {
    const auto ra = acceptSampled(drafts, q, p, a);
    const auto rb = acceptSampled(drafts, q, p, b);
    EXPECT_EQ(ra.accepted, rb.accepted);
    EXPECT_EQ(ra.next_token, rb.next_token);
    EXPECT_EQ(ra.uniforms, rb.uniforms);
  }
}

// --- processed distributions ---------------------------------------------------

TEST(ProcessedProbs, TemperatureTopKTopP) {
  const auto logits = torch::tensor({2.0f, 1.0f, 0.5f, -1.0f, 3.0f});
  SamplingSettings s;
  auto greedy = processedProbs(logits, s);
  EXPECT_EQ(greedy.argmax().item<int64_t>(), 4);
  EXPECT_FLOAT_EQ(greedy.sum().item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(greedy[4].item<float>(), 1.0f);

  s.greedy = false;
  s.temperature = 0.5;
  EXPECT_TRUE(torch::allclose(processedProbs(logits, s), (logits / 0.5).softmax(0)));

  s.temperature = 1.0;
  s.top_k = 2;  // keeps ids 4 and 0
  auto topk = processedProbs(logits, s);
  EXPECT_EQ((topk > 0).sum().item<int64_t>(), 2);
  EXPECT_GT(topk[4].item<float>(), 0.0f);
  EXPECT_GT(topk[0].item<float>(), 0.0f);

  s.top_k = 0;
  s.top_p = 0.9;  // softmax: ~[0.23, 0.08, 0.05, 0.01, 0.62]: keeps 4, 0, 1 (0.93 >= 0.9)
  auto topp = processedProbs(logits, s);
  EXPECT_EQ((topp > 0).sum().item<int64_t>(), 3);
  EXPECT_EQ(topp[2].item<float>(), 0.0f);
  EXPECT_NEAR(topp.sum().item<float>(), 1.0f, 1e-6);

  s.top_p = 0.01;  // always keeps the most likely one
  auto tiny = processedProbs(logits, s);
  EXPECT_FLOAT_EQ(tiny[4].item<float>(), 1.0f);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// --- the n-gram (prompt lookup) drafter ------------------------------------------

TEST(NgramDrafter, ProposesWhatFollowedTheLatestOccurrence) {
  const NgramDrafter drafter(3);
  const std::vector<int64_t> seq = {1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3};
  EXPECT_EQ(drafter.propose(seq, 4), (std::vector<int64_t>{7, 5, 1, 2}));  // after the 2nd "1 2 3", not the 1st
  EXPECT_EQ(drafter.propose(seq, 1), (std::vector<int64_t>{7}));
  EXPECT_TRUE(drafter.propose(seq, 0).empty());
  // Falls back to shorter n-grams: only "6" recurs.
  EXPECT_EQ(drafter.propose({4, 5, 6, 8, 6}, 2), (std::vector<int64_t>{8, 6}));
  // Nothing recurs: no proposal.
  EXPECT_TRUE(drafter.propose({1, 2, 3}, 4).empty());
  EXPECT_TRUE(drafter.propose({5}, 4).empty());
  // n is capped by max_ngram: with n <= 1 the last token alone is matched.
  EXPECT_EQ(NgramDrafter(1).propose({3, 4, 1, 3}, 1), (std::vector<int64_t>{4}));
  EXPECT_THROW(NgramDrafter(0), Error);
}

TEST(NgramDrafter, RepeatingOutputGetsFullLengthProposals) {
  const NgramDrafter drafter(3);
  EXPECT_EQ(drafter.propose({9, 9, 9}, 4), (std::vector<int64_t>{9, 9, 9, 9}));
  EXPECT_EQ(drafter.propose({7, 1, 2, 1, 2}, 5), (std::vector<int64_t>{1, 2, 1, 2, 1}));
  EXPECT_EQ(drafter.propose({4, 5, 6, 8, 6}, 3), (std::vector<int64_t>{8, 6, 8}));
}


// --- what a drafter says it is, and how it drafts -----------------------------------

TEST(Drafter, PromptLookupDraftsOneHotProposalsWithoutACache) {
  const NgramDrafter drafter(3);
  EXPECT_EQ(drafter.type(), DrafterType::PromptLookup);
  EXPECT_EQ(drafter.model(), nullptr);
  const std::vector<int64_t> sequence = {1, 2, 3, 9, 1, 2, 3};
  const SamplingSettings sampling{false, 0.8, 0, 1.0};
  auto generator = makeGenerator(1);
  const std::vector<int64_t> eos = {9};  // a proposal is not cut at an end of sequence
  int feeds = 0;
  const DraftRequest request{sequence, 3, sampling, generator, eos, false, 12, [&](const std::vector<int64_t>&) {
                               ++feeds;
                               return at::Tensor();
                             }};
  const Draft draft = drafter.draft(request);
  EXPECT_EQ(draft.tokens, (std::vector<int64_t>{9, 1, 2}));
  EXPECT_EQ(feeds, 0);  // no network: nothing fed
  EXPECT_EQ(draft.q_of_picks, (std::vector<double>{1.0, 1.0, 1.0}));
  ASSERT_TRUE(draft.q.defined());
  EXPECT_EQ(draft.q.sizes(), (std::vector<int64_t>{3, 12}));
  EXPECT_TRUE(torch::equal(draft.q.argmax(1), torch::tensor({9, 1, 2}, torch::kInt64)));
  EXPECT_FLOAT_EQ(draft.q.sum().item<float>(), 3.0f);
  EXPECT_FALSE(draft.logits.defined());
}

// A model drafter drafts through the feed it is handed (the session's tracked
// cache): each call gets the sequence and the drafts so far.
TEST(Drafter, ModelDrafterFeedsEveryDraftThroughTheSessionsFeed) {
  const ModelDrafter drafter(testing_support::fixtureModel("llama-tiny-draft"), "d");
  EXPECT_EQ(drafter.type(), DrafterType::Model);
  EXPECT_NE(drafter.model(), nullptr);
  const int64_t vocab = 8;
  std::vector<std::vector<int64_t>> streams;
  // Logits whose argmax is (stream length) mod vocab.
  auto feed = [&](const std::vector<int64_t>& stream) {
    streams.push_back(stream);
    auto logits = torch::zeros({vocab});
    logits[static_cast<int64_t>(stream.size()) % vocab] = 2.0;
    return logits;
  };
  const std::vector<int64_t> sequence = {1, 2, 3};
  const SamplingSettings greedy;
  auto generator = makeGenerator(1);
  const std::vector<int64_t> eos = {5};
  const Draft draft = drafter.draft({sequence, 4, greedy, generator, eos, false, vocab, feed});
  EXPECT_EQ(draft.tokens, (std::vector<int64_t>{3, 4, 5}));  // stops after proposing the end of sequence
  ASSERT_EQ(streams.size(), 3u);
  EXPECT_EQ(streams[2], (std::vector<int64_t>{1, 2, 3, 3, 4}));
  EXPECT_FALSE(draft.q.defined());  // greedy: no distributions kept
  ASSERT_EQ(draft.q_of_picks.size(), 3u);
  const double top = std::exp(2.0) / (std::exp(2.0) + vocab - 1);
  EXPECT_NEAR(draft.q_of_picks[0], top, 1e-6);
  EXPECT_EQ(draft.logits.sizes(), (std::vector<int64_t>{3, vocab}));

  streams.clear();
  const Draft all = drafter.draft({sequence, 4, greedy, generator, eos, true, vocab, feed});
  EXPECT_EQ(all.tokens, (std::vector<int64_t>{3, 4, 5, 6}));  // the end of sequence ignored
}

}  // namespace
}  // namespace kvscope
