// Speculative sampling reproduces the target's distribution (Leviathan et al.,
// Chen et al.), tested on kvscope's Session with the fixture pair llama-tiny
// (target) and llama-tiny-draft (drafter).
//
// First token: for a fixed prefix, the first emitted token of 20,000 seeded
// sessions (gamma 2) against the target's processed distribution, a
// chi-square test (p > 0.001) at temperature 0.8 and with top-p 0.9. Negative
// controls of the same size must fail the same test: the first *draft* token
// (drawn from the drafter's q) against p, and the emitted tokens against q.
//
// Every emitted token: sessions at gamma 1 and 4 that run several rounds. Each
// generated token, given the tokens before it, must follow p; taken apart by
// how it was made, an accepted draft follows norm(min(p, q)), a correction at
// the first rejection norm(max(0, p - q)), a bonus after a fully accepted
// round p. Each token's p and q come from one uncached forward of each model
// over the finished sequence, and the tokens of each kind are tested with the
// randomized PIT (randomized_pit.h). The same statistics must reject two wrong
// accept rules run through a plain speculative loop written here: one that
// draws the correction from p, and one that accepts every draft; the loop with
// the Session's own rule (acceptSampled) must pass them.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <chrono>
#include <functional>
#include <random>

#include "chi_square.h"
#include "core/decode/sampling.h"
#include "core/decode/speculative_acceptance.h"
#include "core/model/scoring.h"
#include "randomized_pit.h"
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

// --- every emitted token ----------------------------------------------------

// How a generated token was made.
enum class TokenKind { AcceptedDraft, Correction, Bonus, TargetStep };

struct GeneratedToken {
  int64_t position = 0;           // index in the sequence
  TokenKind kind = TokenKind::TargetStep;
  bool after_correction = false;  // the first token of a round that follows a rejection
};

struct SpeculativeRun {
  std::vector<int64_t> sequence;  // the prefix, then the generated tokens
  std::vector<GeneratedToken> tokens;
};

// Appends one round's output: the accepted drafts, then the next token (a
// correction after a rejection, a bonus after a fully accepted round, or a
// plain target step when the round drafted nothing).
void appendRound(const std::vector<int64_t>& drafts, int64_t accepted, int64_t next_token, bool after_correction,
                 SpeculativeRun& run) {
  const auto k = static_cast<int64_t>(drafts.size());
  for (int64_t i = 0; i < accepted; ++i) {
    run.tokens.push_back({static_cast<int64_t>(run.sequence.size()), TokenKind::AcceptedDraft, after_correction && i == 0});
    run.sequence.push_back(drafts[static_cast<size_t>(i)]);
  }
  const TokenKind kind = k == 0 ? TokenKind::TargetStep : (accepted < k ? TokenKind::Correction : TokenKind::Bonus);
  run.tokens.push_back({static_cast<int64_t>(run.sequence.size()), kind, after_correction && accepted == 0});
  run.sequence.push_back(next_token);
}

bool roundRejected(int64_t drafted, int64_t accepted) { return drafted > 0 && accepted < drafted; }

// One seeded Session to max_new tokens; its rounds say how each token was made.
SpeculativeRun sessionRun(int64_t gamma, int64_t max_new, const SamplingSettings& sampling, uint64_t seed) {
  SessionOptions o = fastOptions(gamma, max_new, /*use_cache=*/true, sampling, seed);
  o.ignore_eos = true;
  const auto drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "llama-tiny-draft");
  Session session(fixtureModel("llama-tiny"), drafter, kPrefix, o, {2});
  session.runToEnd();
  SpeculativeRun run;
  run.sequence = kPrefix;
  bool after_correction = false;
  for (size_t i = 1; i < session.rounds().size(); ++i) {  // [0] is the prefill
    const RoundRecord& r = session.rounds()[i];
    appendRound(r.drafts, r.accepted, r.next_token, after_correction, run);
    after_correction = roundRejected(static_cast<int64_t>(r.drafts.size()), r.accepted);
  }
  EXPECT_EQ(run.sequence, session.sequence()) << "the rounds do not add up to the session's sequence";
  return run;
}

// An accept rule: drafts [k], q [k, vocab], p [k + 1, vocab] -> the outcome.
using AcceptRule =
    std::function<AcceptanceResult(const std::vector<int64_t>&, const at::Tensor&, const at::Tensor&, at::Generator&)>;

// Wrong on purpose: at the first rejection the correction is drawn from p
// itself instead of norm(max(0, p - q)), so tokens the drafter over-proposes
// come out too often.
AcceptanceResult correctionFromP(const std::vector<int64_t>& drafts, const at::Tensor& q, const at::Tensor& p,
                                 at::Generator& generator) {
  AcceptanceResult result;
  const auto k = static_cast<int64_t>(drafts.size());
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = drafts[static_cast<size_t>(i)];
    const double u = uniform(generator);
    if (q[i][d].item<double>() > 0 && u < p[i][d].item<double>() / q[i][d].item<double>()) {
      ++result.accepted;
      continue;
    }
    result.next_token = sampleFrom(p[i], generator);
    return result;
  }
  result.bonus = k > 0;
  result.next_token = sampleFrom(p[k], generator);
  return result;
}

// Wrong on purpose: every draft is kept, then a bonus from p_{k+1}.
AcceptanceResult acceptEveryDraft(const std::vector<int64_t>& drafts, const at::Tensor&, const at::Tensor& p,
                                  at::Generator& generator) {
  AcceptanceResult result;
  result.accepted = static_cast<int64_t>(drafts.size());
  result.bonus = result.accepted > 0;
  result.next_token = sampleFrom(p[result.accepted], generator);
  return result;
}

// A plain speculative loop with uncached forwards and a pluggable accept rule:
// the same models, sampling and draft lengths as the Session (never draft the
// last token), so a rule's mistakes are the only difference.
SpeculativeRun loopRun(const AcceptRule& rule, int64_t gamma, int64_t max_new, const SamplingSettings& sampling,
                       uint64_t seed) {
  c10::InferenceMode guard;
  const CausalLM& target = *fixtureModel("llama-tiny");
  const CausalLM& drafter = *fixtureModel("llama-tiny-draft");
  auto generator = makeGenerator(seed);
  SpeculativeRun run;
  run.sequence = kPrefix;
  bool after_correction = false;
  while (static_cast<int64_t>(run.tokens.size()) < max_new) {
    const int64_t k = std::min(gamma, max_new - static_cast<int64_t>(run.tokens.size()) - 1);
    std::vector<int64_t> tokens = run.sequence, drafts;
    std::vector<at::Tensor> q_rows;
    for (int64_t i = 0; i < k; ++i) {
      const auto logits = drafter.forward(idsTensor(tokens), 0, nullptr, nullptr, 1)[0];  // [vocab]
      q_rows.push_back(processedProbs(logits, sampling));
      drafts.push_back(sampleFrom(q_rows.back(), generator));
      tokens.push_back(drafts.back());
    }
    const auto p = processedProbRows(target.forward(idsTensor(tokens), 0, nullptr, nullptr, k + 1), sampling);  // [k + 1, vocab]
    const auto q = k > 0 ? torch::stack(q_rows) : p.narrow(0, 0, 0);                                          // [k, vocab]
    const AcceptanceResult r = rule(drafts, q, p, generator);
    appendRound(drafts, r.accepted, r.next_token, after_correction, run);
    after_correction = roundRejected(k, r.accepted);
  }
  return run;
}

// Row j: the distribution of the token at position j + 1 given the tokens
// before it ([sequence length, vocab], one uncached forward).
std::vector<std::vector<double>> distributions(const CausalLM& model, const std::vector<int64_t>& sequence,
                                               const SamplingSettings& sampling) {
  c10::InferenceMode guard;
  const auto probs =
      processedProbRows(model.forward(idsTensor(sequence), 0, nullptr), sampling).to(torch::kFloat64).contiguous();
  std::vector<std::vector<double>> rows;
  for (int64_t j = 0; j < probs.size(0); ++j) {
    const double* row = probs[j].data_ptr<double>();
    rows.emplace_back(row, row + probs.size(1));
  }
  return rows;
}

// Ten chi-square tests per run of checks (five kinds, two orders): at 1e-4
// each, an exact sampler fails one of them with probability under 0.1%, and
// the wrong rules below reach p < 1e-15.
constexpr double kEveryTokenAlpha = 1e-4;

// One hypothesis for one kind of token, tested in two orders of the
// vocabulary: by p / q (an accept or correction mistake moves mass between
// tokens the drafter over- and under-proposes) and by the hypothesis's own
// probability, most likely first (a temperature or top-p mistake).
struct TokenCheck {
  std::string name;
  PitTally by_ratio, by_probability;

  void add(int64_t token, const std::vector<double>& hypothesis, const std::vector<double>& ratio,
           std::mt19937_64& rng) {
    std::vector<double> descending(hypothesis.size());
    for (size_t t = 0; t < hypothesis.size(); ++t) descending[t] = -hypothesis[t];
    by_ratio.add(token, hypothesis, ratio, rng);
    by_probability.add(token, hypothesis, descending, rng);
  }
  bool passes() const {
    return by_ratio.test().passes(kEveryTokenAlpha) && by_probability.test().passes(kEveryTokenAlpha);
  }
  double smallestP() const {
    const auto a = by_ratio.test(), b = by_probability.test();
    const double pa = a.outside_support > 0 ? 0.0 : a.p_value, pb = b.outside_support > 0 ? 0.0 : b.p_value;
    return std::min(pa, pb);
  }
  std::string describe() const {
    return name + ": " + std::to_string(by_ratio.count()) + " tokens; by p/q: " + by_ratio.test().describe() +
           "; by probability: " + by_probability.test().describe();
  }
};

struct EveryTokenChecks {
  TokenCheck every{"every generated token vs p"};
  TokenCheck accepted{"accepted drafts vs norm(min(p, q))"};
  TokenCheck correction{"corrections vs norm(max(0, p - q))"};
  TokenCheck bonus{"bonus tokens vs p"};
  TokenCheck after_correction{"first token after a rejection's correction vs p"};
  double ms = 0;

  std::vector<const TokenCheck*> all() const { return {&every, &accepted, &correction, &bonus, &after_correction}; }

  // Every generated token of a finished run, against the distributions that
  // one uncached forward of each model gives for its position.
  void add(const SpeculativeRun& run, const SamplingSettings& sampling, std::mt19937_64& rng) {
    const auto p_rows = distributions(*fixtureModel("llama-tiny"), run.sequence, sampling);
    const auto q_rows = distributions(*fixtureModel("llama-tiny-draft"), run.sequence, sampling);
    for (const GeneratedToken& g : run.tokens) {
      const auto& p = p_rows[static_cast<size_t>(g.position - 1)];
      const auto& q = q_rows[static_cast<size_t>(g.position - 1)];
      std::vector<double> ratio(p.size()), overlap(p.size()), residual(p.size());
      for (size_t t = 0; t < p.size(); ++t) {
        ratio[t] = q[t] > 0 ? p[t] / q[t] : (p[t] > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        overlap[t] = std::min(p[t], q[t]);
        residual[t] = std::max(0.0, p[t] - q[t]);
      }
      const int64_t token = run.sequence[static_cast<size_t>(g.position)];
      every.add(token, p, ratio, rng);
      if (g.kind == TokenKind::AcceptedDraft) accepted.add(token, overlap, ratio, rng);
      if (g.kind == TokenKind::Correction) correction.add(token, residual, ratio, rng);
      if (g.kind == TokenKind::Bonus) bonus.add(token, p, ratio, rng);
      if (g.after_correction) after_correction.add(token, p, ratio, rng);
    }
  }

  void print(const std::string& label) const {
    std::cout << "[ info ] " << label << " (" << ms << " ms)\n";
    for (const TokenCheck* c : all()) std::cout << "[ info ]   " << c->describe() << "\n";
  }
};

const SamplingSettings kEveryTokenSampling = sampledSettings(0.8, 0, 0.9);

EveryTokenChecks checkRuns(const std::function<SpeculativeRun(uint64_t)>& make_run, int runs, uint64_t first_seed) {
  EveryTokenChecks checks;
  std::mt19937_64 rng(first_seed);  // the PIT's own draws
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) checks.add(make_run(first_seed + static_cast<uint64_t>(i)), kEveryTokenSampling, rng);
  checks.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return checks;
}

// Enough tokens of every kind for the test to mean something: 10 bins of at
// least 20 expected tokens each.
constexpr int64_t kMinTokensPerKind = 200;

void expectExact(const EveryTokenChecks& checks, const std::string& label) {
  checks.print(label);
  for (const TokenCheck* c : checks.all()) {
    EXPECT_GE(c->by_ratio.count(), kMinTokensPerKind) << label << ": too few tokens for " << c->name;
    EXPECT_TRUE(c->passes()) << label << ": " << c->describe();
  }
}

// gamma 1: 800 runs of 6 tokens; gamma 4: 400 runs of 12 tokens (three
// rounds or more each, so tokens after a rejection and bonus tokens come in
// every position of a round): 4,800 tokens each, at least 200 of every kind.
constexpr int kRunsGamma1 = 800, kRunsGamma4 = 400;
constexpr int64_t kNewGamma1 = 6, kNewGamma4 = 12;

TEST(SpeculativeSamplingEveryToken, SessionAtGamma1) {
  const auto checks = checkRuns(
      [](uint64_t seed) { return sessionRun(1, kNewGamma1, kEveryTokenSampling, seed); }, kRunsGamma1, 3000000);
  expectExact(checks, "Session, gamma 1");
}

TEST(SpeculativeSamplingEveryToken, SessionAtGamma4) {
  const auto checks = checkRuns(
      [](uint64_t seed) { return sessionRun(4, kNewGamma4, kEveryTokenSampling, seed); }, kRunsGamma4, 4000000);
  expectExact(checks, "Session, gamma 4");
}

// The loop the negative controls run through is itself exact with the
// Session's accept rule, so their failures below come from their rules.
TEST(SpeculativeSamplingEveryToken, TestLoopWithTheSessionsRulePasses) {
  const auto checks = checkRuns(
      [](uint64_t seed) { return loopRun(acceptSampled, 4, kNewGamma4, kEveryTokenSampling, seed); }, 300, 5000000);
  expectExact(checks, "test loop with acceptSampled, gamma 4");
}

// Negative controls: 1,800 tokens at each gamma (fewer than above), and still
// rejected decisively.
int controlRuns(int64_t gamma) { return gamma == 1 ? 300 : 150; }

TEST(SpeculativeSamplingEveryToken, CorrectionDrawnFromPIsCaught) {
  for (int64_t gamma : {1, 4}) {
    const int64_t max_new = gamma == 1 ? kNewGamma1 : kNewGamma4;
    const auto checks = checkRuns(
        [&](uint64_t seed) { return loopRun(correctionFromP, gamma, max_new, kEveryTokenSampling, seed); },
        controlRuns(gamma), 6000000 + 100000 * static_cast<uint64_t>(gamma));
    checks.print("control: correction from p, gamma " + std::to_string(gamma));
    EXPECT_FALSE(checks.every.passes()) << checks.every.describe();
    EXPECT_LT(checks.every.smallestP(), 1e-6) << checks.every.describe();
    // Tokens where q >= p have no residual mass: drawn from p, they show up.
    EXPECT_GT(checks.correction.by_ratio.outsideSupport(), 0) << checks.correction.describe();
  }
}

TEST(SpeculativeSamplingEveryToken, AcceptingEveryDraftIsCaught) {
  for (int64_t gamma : {1, 4}) {
    const int64_t max_new = gamma == 1 ? kNewGamma1 : kNewGamma4;
    const auto checks = checkRuns(
        [&](uint64_t seed) { return loopRun(acceptEveryDraft, gamma, max_new, kEveryTokenSampling, seed); },
        controlRuns(gamma), 7000000 + 100000 * static_cast<uint64_t>(gamma));
    checks.print("control: every draft accepted, gamma " + std::to_string(gamma));
    EXPECT_FALSE(checks.every.passes()) << checks.every.describe();
    EXPECT_LT(checks.every.smallestP(), 1e-6) << checks.every.describe();
    EXPECT_FALSE(checks.accepted.passes()) << checks.accepted.describe();
    EXPECT_EQ(checks.correction.by_ratio.count(), 0);  // it never rejects
  }
}

}  // namespace
}  // namespace kvscope
