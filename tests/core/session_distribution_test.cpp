// Issue 3, "Must show" 2: speculative sampling preserves the target's
// distribution. For a fixed prefix, the first emitted token of 20,000 seeded
// sessions (model drafter llama-tiny-draft, gamma 2) is tested against the
// target's processed distribution with a chi-square test (p > 0.001), with
// temperature 0.8 and with top-p 0.9. Negative controls of the same size must
// fail the same test: the first *draft* token (drawn from the drafter's q)
// against p, and the emitted tokens against q.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <chrono>

#include "chi_square.h"
#include "core/decode/speculative_acceptance.h"
#include "core/model/scoring.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

constexpr double kAlpha = 0.001;

// --- the chi-square survival function against known values ----------------

TEST(ChiSquare, SurvivalFunctionMatchesClosedForms) {
  // df = 2: sf(x) = exp(-x / 2). df = 1: sf(x) = erfc(sqrt(x / 2)).
  for (double x : {0.01, 0.5, 1.0, 2.0, 3.5, 7.0, 15.0, 40.0, 90.0}) {
    EXPECT_NEAR(chiSquareSurvival(x, 2), std::exp(-x / 2), 1e-12 + 1e-10 * std::exp(-x / 2)) << x;
    EXPECT_NEAR(chiSquareSurvival(x, 1), std::erfc(std::sqrt(x / 2)), 1e-12 + 1e-10 * std::erfc(std::sqrt(x / 2)))
        << x;
  }
  // df = 4: sf(x) = exp(-x / 2) (1 + x / 2).
  for (double x : {0.3, 2.0, 5.0, 12.0, 30.0}) {
    const double want = std::exp(-x / 2) * (1 + x / 2);
    EXPECT_NEAR(chiSquareSurvival(x, 4), want, 1e-12 + 1e-10 * want) << x;
  }
  // Tabulated critical values (upper 5% and 0.1% points).
  EXPECT_NEAR(chiSquareSurvival(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chiSquareSurvival(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(chiSquareSurvival(124.34211340400407, 100), 0.05, 1e-9);
  EXPECT_NEAR(chiSquareSurvival(29.58829844507442, 10), 0.001, 1e-10);
  EXPECT_NEAR(chiSquareSurvival(0.0, 5), 1.0, 0.0);
  EXPECT_LT(chiSquareSurvival(500.0, 10), 1e-90);
  EXPECT_EQ(chiSquareSurvival(std::numeric_limits<double>::infinity(), 10), 0.0);
}

TEST(ChiSquare, MergesSmallBinsAndDetectsMismatch) {
  // 1000 draws of a fair 4-sided die: an exact fit, then a clear misfit.
  const std::vector<double> fair = {0.25, 0.25, 0.25, 0.25};
  const auto fit = chiSquareTest(fair, {250, 250, 250, 250});
  EXPECT_EQ(fit.df, 3);
  EXPECT_DOUBLE_EQ(fit.statistic, 0.0);
  EXPECT_TRUE(fit.passes(kAlpha));
  EXPECT_FALSE(chiSquareTest(fair, {400, 200, 200, 200}).passes(kAlpha));
  // Tiny probabilities are pooled: expected 1 + 1 + 2 -> one bin of 4, grown
  // with the next bin (expected 96) to reach 5.
  const auto pooled = chiSquareTest({0.001, 0.001, 0.002, 0.096, 0.9}, {1, 1, 2, 96, 900});
  EXPECT_EQ(pooled.bins, 2);
  EXPECT_EQ(pooled.df, 1);
  // An observation where the hypothesis has probability 0 fails outright.
  const auto impossible = chiSquareTest({0.5, 0.5, 0.0}, {500, 499, 1});
  EXPECT_EQ(impossible.outside_support, 1);
  EXPECT_FALSE(impossible.passes(kAlpha));
}

// --- the accept rule alone, on a hand-made 6-token vocabulary ---------------

TEST(SpeculativeSamplingDistribution, AcceptRuleAloneReproducesP) {
  const auto p = torch::tensor({0.05f, 0.30f, 0.10f, 0.35f, 0.20f, 0.0f});
  const auto q = torch::tensor({0.40f, 0.05f, 0.25f, 0.10f, 0.05f, 0.15f});
  auto generator = makeGenerator(99);
  const int runs = 30000;
  std::vector<int64_t> emitted(6, 0), drafted(6, 0);
  const auto q2 = q.unsqueeze(0);                            // [1, 6]
  const auto p2 = torch::stack({p, torch::full({6}, 1.0f / 6)});  // [2, 6]
  for (int i = 0; i < runs; ++i) {
    const int64_t d = sampleFrom(q, generator);
    ++drafted[d];
    const auto r = acceptSampled({d}, q2, p2, generator);
    ++emitted[r.accepted == 1 ? d : r.next_token];
  }
  const std::vector<double> pv = {0.05, 0.30, 0.10, 0.35, 0.20, 0.0};
  const std::vector<double> qv = {0.40, 0.05, 0.25, 0.10, 0.05, 0.15};
  const auto good = chiSquareTest(pv, emitted);
  EXPECT_TRUE(good.passes(kAlpha)) << good.describe();
  const auto control = chiSquareTest(pv, drafted);  // the drafts themselves follow q, not p
  EXPECT_FALSE(control.passes(kAlpha)) << control.describe();
  EXPECT_TRUE(chiSquareTest(qv, drafted).passes(kAlpha));
}

// --- whole sessions ---------------------------------------------------------

struct SessionDraws {
  std::vector<int64_t> emitted;  // per token id: first emitted token counts
  std::vector<int64_t> drafted;  // per token id: first draft token counts
  int64_t first_draft_accepted = 0;
  double ms = 0;
};

constexpr int kRuns = 20000;
constexpr int64_t kGamma = 2;
// The prefix: <s> alone. Then the prefill has nothing to feed, and a run costs
// three forwards (two drafts, one verify); the processed distributions still
// spread over ~470 tokens with an expected count >= 5 in 20,000 draws.
const std::vector<int64_t> kPrefix = {1};

SessionDraws drawFirstTokens(const SamplingSettings& sampling, uint64_t first_seed) {
  const auto target = fixtureModel("llama-tiny");
  const auto drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "llama-tiny-draft");
  const int64_t vocab = target->config().vocab_size;
  SessionDraws draws;
  draws.emitted.assign(vocab, 0);
  draws.drafted.assign(vocab, 0);
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < kRuns; ++run) {
    // max_new = gamma + 1, so the first round drafts all gamma tokens.
    SessionOptions o = fastOptions(kGamma, kGamma + 1, /*use_cache=*/true, sampling, /*seed=*/first_seed + run);
    o.ignore_eos = true;
    Session session(target, drafter, kPrefix, o, {2});
    for (int phase = 0; phase < 4; ++phase) session.stepPhase();  // prefill, draft, verify, accept
    const RoundRecord& round = session.rounds().at(1);
    if (round.drafts.size() != static_cast<size_t>(kGamma)) {
      ADD_FAILURE() << "run " << run << " drafted " << round.drafts.size() << " tokens";
      break;
    }
    ++draws.emitted.at(session.sequence().at(kPrefix.size()));
    ++draws.drafted.at(round.drafts[0]);
    if (round.accepted >= 1) ++draws.first_draft_accepted;
  }
  draws.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return draws;
}

std::vector<double> processedAtPrefix(const CausalLM& model, const SamplingSettings& sampling) {
  c10::InferenceMode guard;
  const auto logits = model.forward(idsTensor(kPrefix), 0, nullptr)[-1];
  const auto probs = processedProbs(logits, sampling).to(torch::kFloat64).contiguous();
  return std::vector<double>(probs.data_ptr<double>(), probs.data_ptr<double>() + probs.numel());
}

void checkDistribution(const SamplingSettings& sampling, uint64_t first_seed, const std::string& label) {
  const auto p = processedAtPrefix(*fixtureModel("llama-tiny"), sampling);
  const auto q = processedAtPrefix(*fixtureModel("llama-tiny-draft"), sampling);
  const SessionDraws draws = drawFirstTokens(sampling, first_seed);
  ASSERT_EQ(std::accumulate(draws.emitted.begin(), draws.emitted.end(), int64_t{0}), kRuns);

  const auto emitted_vs_p = chiSquareTest(p, draws.emitted);
  const auto drafted_vs_p = chiSquareTest(p, draws.drafted);  // negative control 1
  const auto emitted_vs_q = chiSquareTest(q, draws.emitted);  // negative control 2
  const auto drafted_vs_q = chiSquareTest(q, draws.drafted);  // the drafter samples from q
  double tv = 0;  // total variation distance between p and q, for the record
  for (size_t i = 0; i < p.size(); ++i) tv += std::fabs(p[i] - q[i]) / 2;
  std::cout << "[ info ] " << label << ": " << kRuns << " sessions in " << draws.ms << " ms ("
            << draws.ms / kRuns << " ms each); first draft accepted in " << draws.first_draft_accepted
            << " runs; TV(p, q) = " << tv << "\n"
            << "[ info ]   emitted vs p: " << emitted_vs_p.describe() << "\n"
            << "[ info ]   first draft vs p (control): " << drafted_vs_p.describe() << "\n"
            << "[ info ]   emitted vs q (control): " << emitted_vs_q.describe() << "\n"
            << "[ info ]   first draft vs q: " << drafted_vs_q.describe() << "\n";

  EXPECT_TRUE(emitted_vs_p.passes(kAlpha)) << label << ": " << emitted_vs_p.describe();
  EXPECT_GE(emitted_vs_p.df, 20) << "too few bins for a meaningful test";
  EXPECT_FALSE(drafted_vs_p.passes(kAlpha)) << label << " control: " << drafted_vs_p.describe();
  EXPECT_FALSE(emitted_vs_q.passes(kAlpha)) << label << " control: " << emitted_vs_q.describe();
  EXPECT_TRUE(drafted_vs_q.passes(kAlpha)) << label << ": " << drafted_vs_q.describe();
  // Both the accept path and the correction path produced first tokens.
  EXPECT_GT(draws.first_draft_accepted, kRuns / 20);
  EXPECT_LT(draws.first_draft_accepted, kRuns - kRuns / 20);
}

TEST(SpeculativeSamplingDistribution, FirstTokenMatchesTargetAtTemperature08) {
  checkDistribution(sampledSettings(0.8), 1000000, "temperature 0.8");
}

TEST(SpeculativeSamplingDistribution, FirstTokenMatchesTargetWithTopP09) {
  checkDistribution(sampledSettings(1.0, 0, 0.9), 2000000, "top-p 0.9");
}

}  // namespace
}  // namespace kvscope
