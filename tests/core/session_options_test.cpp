// The rest of the session's contract: determinism from a seed with
// the cache on and off, the seed bookkeeping variant, refused drafters,
// context and option errors, adaptive gamma, EOS, cancellation and metrics.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <atomic>

#include "core/error.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

std::shared_ptr<const Drafter> modelDrafter(const std::string& name = "llama-tiny-draft") {
  return std::make_shared<ModelDrafter>(fixtureModel(name), name);
}

std::vector<int64_t> runSession(const std::shared_ptr<const Drafter>& drafter, const std::vector<int64_t>& prompt,
                                SessionOptions o, std::vector<RoundRecord>* rounds = nullptr,
                                std::vector<CacheEvent>* events = nullptr) {
  Session session(fixtureModel("llama-tiny"), drafter, prompt, o, {2});
  session.runToEnd();
  EXPECT_TRUE(session.finished());
  if (rounds) *rounds = session.rounds();
  if (events) *events = session.events().events();
  return session.generated();
}

// Expects `make()` to throw an Error whose message contains every part.
template <typename F>
void expectError(F make, const std::vector<std::string>& parts, const std::string& what) {
  try {
    make();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << what << ": message '" << e.what() << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not a kvscope::Error: " << e.what();
  }
}

// --- determinism -----------------------------------------------------------------

TEST(SessionDeterminism, SameSeedSameTokensWithCacheOnAndOff) {
  const auto prompts = randomPrompts(4, 512, 2, 20, /*seed=*/31);
  const std::vector<SamplingSettings> settings = {sampledSettings(1.0), sampledSettings(0.8, 0, 0.9),
                                                  sampledSettings(1.2, 50, 1.0)};
  int differing_seeds = 0;
  for (const auto& drafter : {modelDrafter(), std::shared_ptr<const Drafter>(std::make_shared<NgramDrafter>(2))}) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const SamplingSettings& s = settings[i % settings.size()];
      std::vector<RoundRecord> on_rounds, off_rounds, again_rounds;
      auto options = [&](bool use_cache, uint64_t seed) {
        SessionOptions o = fastOptions(3, 16, use_cache, s, seed);
        o.ignore_eos = true;
        return o;
      };
      const auto on = runSession(drafter, prompts[i], options(true, 100 + i), &on_rounds);
      const auto off = runSession(drafter, prompts[i], options(false, 100 + i), &off_rounds);
      const auto again = runSession(drafter, prompts[i], options(true, 100 + i), &again_rounds);
      const auto other = runSession(drafter, prompts[i], options(true, 900 + i));
      const std::string label = drafter->describe() + " prompt " + std::to_string(i) + " " + s.describe();
      EXPECT_EQ(on, off) << label;
      EXPECT_EQ(on, again) << label;
      EXPECT_EQ(on.size(), 16u) << label;
      if (other != on) ++differing_seeds;
      ASSERT_EQ(on_rounds.size(), off_rounds.size()) << label;
      for (size_t r = 0; r < on_rounds.size(); ++r) {
        EXPECT_EQ(on_rounds[r].drafts, off_rounds[r].drafts) << label << " round " << r;
        EXPECT_EQ(on_rounds[r].accepted, off_rounds[r].accepted) << label << " round " << r;
        EXPECT_EQ(on_rounds[r].uniforms, off_rounds[r].uniforms) << label << " round " << r;  // same draws
        ASSERT_LT(r, again_rounds.size());
        EXPECT_EQ(on_rounds[r].uniforms, again_rounds[r].uniforms);
      }
    }
  }
  EXPECT_GE(differing_seeds, 6);  // the seed matters
}

TEST(SessionDeterminism, SeedBookkeepingGivesTheSameTokensAsExact) {
  const auto prompts = randomPrompts(5, 512, 1, 30, /*seed=*/41);
  for (const auto& drafter : {modelDrafter(), std::shared_ptr<const Drafter>(std::make_shared<NgramDrafter>(3))}) {
    for (int64_t gamma : {1, 2, 4}) {
      for (size_t i = 0; i < prompts.size(); ++i) {
        for (const SamplingSettings& s : {greedySettings(), sampledSettings(0.9)}) {
          SessionOptions exact = fastOptions(gamma, 14, true, s, 7 + i);
          SessionOptions seed = exact;
          seed.bookkeeping = Bookkeeping::Seed;
          std::vector<RoundRecord> exact_rounds, seed_rounds;
          std::vector<CacheEvent> exact_events, seed_events;
          const auto a = runSession(drafter, prompts[i], exact, &exact_rounds, &exact_events);
          const auto b = runSession(drafter, prompts[i], seed, &seed_rounds, &seed_events);
          EXPECT_EQ(a, b) << drafter->describe() << " gamma " << gamma << " prompt " << i << " " << s.describe();
          // The seed variant recomputes more: at least as many target rows fed.
          int64_t fed_exact = 0, fed_seed = 0;
          for (const CacheEvent& e : exact_events)
            if (e.kind != CacheEventKind::Crop && e.cache == CacheRole::Target) fed_exact += static_cast<int64_t>(e.written.size());
          for (const CacheEvent& e : seed_events)
            if (e.kind != CacheEventKind::Crop && e.cache == CacheRole::Target) fed_seed += static_cast<int64_t>(e.written.size());
          if (exact_rounds.size() > 2) EXPECT_GT(fed_seed, fed_exact);
        }
      }
    }
  }
}

// --- refused set-ups -------------------------------------------------------------

TEST(SessionErrors, DrafterWithAnotherVocabularyIsRefused) {
  expectError([] { Session s(fixtureModel("llama-tiny"), modelDrafter("qwen2-tiny"), {1, 2, 3}, fastOptions(2, 4, true, greedySettings()), {2}); },
              {"vocabulary", "448", "512"}, "qwen2-tiny drafting for llama-tiny");
  expectError([] { Session s(fixtureModel("qwen2-tiny"), modelDrafter("llama-tiny-draft"), {1, 2, 3}, fastOptions(2, 4, true, greedySettings()), {447}); },
              {"vocabulary"}, "llama-tiny-draft drafting for qwen2-tiny");
}

TEST(SessionErrors, ContextLengthIsEnforced) {
  const auto target = fixtureModel("llama-tiny");
  ASSERT_EQ(target->config().contextLength(), 256);
  const std::vector<int64_t> prompt(200, 5);
  expectError([&] { Session s(target, modelDrafter(), prompt, fastOptions(2, 57, true, greedySettings()), {2}); },
              {"context length 256", "at most 56"}, "200 + 57 tokens");
  EXPECT_NO_THROW(Session(target, modelDrafter(), prompt, fastOptions(2, 56, true, greedySettings()), {2}));
  expectError([&] { Session s(target, nullptr, std::vector<int64_t>(300, 5), fastOptions(2, 1, true, greedySettings()), {2}); },
              {"context length"}, "300-token prompt");
  expectError([&] { Session s(target, modelDrafter(), {}, fastOptions(2, 4, true, greedySettings()), {2}); },
              {"empty"}, "empty prompt");
  expectError([&] { Session s(target, modelDrafter(), {1, 512}, fastOptions(2, 4, true, greedySettings()), {2}); },
              {"512", "vocabulary"}, "id out of range");
  expectError([&] { Session s(target, modelDrafter(), {1, -1}, fastOptions(2, 4, true, greedySettings()), {2}); },
              {"-1"}, "negative id");
  // A session that fills the context exactly runs to the end.
  SessionOptions o = fastOptions(4, 6, true, greedySettings());
  Session exact_fit(target, modelDrafter(), std::vector<int64_t>(250, 7), o, {2});
  exact_fit.runToEnd();
  EXPECT_EQ(exact_fit.sequence().size(), 256u);
}

TEST(SessionErrors, BadOptionsAreRefused) {
  const auto target = fixtureModel("llama-tiny");
  auto make = [&](SessionOptions o) { Session s(target, modelDrafter(), {1, 2, 3}, o, {2}); };
  SessionOptions o = fastOptions(-1, 4, true, greedySettings());
  expectError([&] { make(o); }, {"gamma", "-1"}, "gamma -1");
  o = fastOptions(2, 4, true, sampledSettings(0.0));
  expectError([&] { make(o); }, {"temperature"}, "temperature 0");
  o = fastOptions(2, 4, true, sampledSettings(-0.5));
  expectError([&] { make(o); }, {"temperature"}, "temperature -0.5");
  o = fastOptions(2, 4, true, sampledSettings(1.0, 0, 1.5));
  expectError([&] { make(o); }, {"top-p", "1.5"}, "top-p 1.5");
  o = fastOptions(2, 4, true, sampledSettings(1.0, 0, 0.0));
  expectError([&] { make(o); }, {"top-p"}, "top-p 0");
  o = fastOptions(2, 4, true, sampledSettings(1.0, -3, 1.0));
  expectError([&] { make(o); }, {"top-k"}, "top-k -3");
  o = fastOptions(2, 0, true, greedySettings());
  expectError([&] { make(o); }, {"max new tokens"}, "max new 0");
  o = fastOptions(2, 4, true, greedySettings());
  o.adaptive_gamma = true;
  o.gamma_min = 3;
  o.gamma_max = 2;
  expectError([&] { make(o); }, {"adaptive"}, "min > max");
  o.gamma_min = 3;
  o.gamma_max = 8;
  o.gamma = 1;
  expectError([&] { make(o); }, {"adaptive"}, "start below min");
  // gamma 0 is allowed: plain target steps.
  o = fastOptions(0, 5, true, greedySettings());
  Session zero(target, modelDrafter(), {1, 2, 3}, o, {2});
  zero.runToEnd();
  EXPECT_EQ(zero.generated().size(), 5u);
  for (const auto& r : zero.rounds()) EXPECT_TRUE(r.drafts.empty());
}

// --- adaptive gamma ----------------------------------------------------------------

void checkAdaptive(const std::shared_ptr<const Drafter>& drafter, const SamplingSettings& s, int64_t start,
                   bool expect_max, bool expect_min) {
  SessionOptions o = fastOptions(start, 60, true, s, 3);
  o.adaptive_gamma = true;
  o.gamma_min = 2;
  o.gamma_max = 7;
  o.ignore_eos = true;
  Session session(fixtureModel("llama-tiny"), drafter, {1, 377, 397}, o, {2});
  session.stepRound();  // prefill
  int64_t seen_max = 0, seen_min = 100;
  int increases = 0, decreases = 0;
  while (!session.finished()) {
    const int64_t before = session.currentGamma();
    session.stepRound();
    const RoundRecord& r = session.rounds().back();
    const int64_t after = session.currentGamma();
    EXPECT_LE(static_cast<int64_t>(r.drafts.size()), before);
    seen_max = std::max(seen_max, after);
    seen_min = std::min(seen_min, after);
    if (r.drafts.empty()) {
      EXPECT_EQ(after, before) << "round " << r.index;  // nothing drafted: nothing learned
      continue;
    }
    const bool all = r.accepted == static_cast<int64_t>(r.drafts.size());
    EXPECT_EQ(after, std::clamp<int64_t>(before + (all ? 2 : -1), 2, 7)) << "round " << r.index;
    (all ? increases : decreases) += 1;
  }
  EXPECT_GE(seen_min, 2);
  EXPECT_LE(seen_max, 7);
  if (expect_max) EXPECT_EQ(seen_max, 7);
  if (expect_min) EXPECT_EQ(seen_min, 2);
  std::cout << "[ info ] " << drafter->describe() << ": " << increases << " increases, " << decreases
            << " decreases\n";
}

TEST(SessionAdaptiveGamma, MovesUpTwoAndDownOneWithinBounds) {
  // llama-tiny drafting for itself under sampling accepts everything: gamma climbs to the max.
  checkAdaptive(std::make_shared<ModelDrafter>(fixtureModel("llama-tiny"), "self"), sampledSettings(1.0), 3, true, false);
  // The 1-layer drafter is mostly rejected under greedy: gamma sinks to the min.
  checkAdaptive(modelDrafter(), greedySettings(), 6, false, true);
  // The n-gram drafter on repetitive greedy output: both directions.
  checkAdaptive(std::make_shared<NgramDrafter>(3), greedySettings(), 4, false, false);
}

// --- EOS -------------------------------------------------------------------------

TEST(SessionEos, StopsAtEndOfSequenceLikeTheBaseline) {
  const auto target = fixtureModel("llama-tiny");
  const std::vector<int64_t> prompt = {1, 300, 42, 17};
  GenerateOptions g;
  g.max_new_tokens = 12;
  g.ignore_eos = true;
  const auto free_run = generateAutoregressive(*target, prompt, g, {}).ids;
  // Declare an end-of-sequence id: the first generated token from the 4th on
  // that did not occur before (so the run stops there, mid-way).
  size_t stop = 3;
  while (stop < free_run.size() &&
         std::find(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(stop), free_run[stop]) !=
             free_run.begin() + static_cast<std::ptrdiff_t>(stop)) {
    ++stop;
  }
  ASSERT_LT(stop, free_run.size() - 1) << "pick another prompt: " << idsToString(free_run);
  const int64_t eos = free_run[stop];
  const std::vector<int64_t> expected(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(stop) + 1);
  g.ignore_eos = false;
  const auto baseline = generateAutoregressive(*target, prompt, g, {eos});
  EXPECT_EQ(baseline.ids, expected);
  EXPECT_TRUE(baseline.stopped_at_eos);
  for (const auto& drafter : {modelDrafter(), std::shared_ptr<const Drafter>(std::make_shared<NgramDrafter>(2))}) {
    for (int64_t gamma : {1, 3, 8}) {
      for (bool use_cache : {true, false}) {
        SessionOptions o = fastOptions(gamma, 12, use_cache, greedySettings());
        Session session(target, drafter, prompt, o, {eos});
        session.runToEnd();
        EXPECT_TRUE(session.finished());
        EXPECT_EQ(session.generated(), expected) << drafter->describe() << " gamma " << gamma;
        EXPECT_TRUE(session.rounds().back().hit_eos);
        // Drafting stops at a drafted EOS.
        for (const auto& r : session.rounds()) {
          for (size_t i = 0; i + 1 < r.drafts.size(); ++i) EXPECT_NE(r.drafts[i], eos);
        }
        o.ignore_eos = true;
        Session ignoring(target, drafter, prompt, o, {eos});
        ignoring.runToEnd();
        EXPECT_EQ(ignoring.generated(), free_run);
      }
    }
  }
}

// --- stepping and cancellation -------------------------------------------------------

// A model drafter that raises a cancel flag the first time the session asks
// it for drafts in round `cancel_round` (inside that round's draft phase).
class CancellingDrafter : public ModelDrafter {
 public:
  CancellingDrafter(std::shared_ptr<const CausalLM> model, std::atomic<bool>* flag, int64_t cancel_round)
      : ModelDrafter(std::move(model), "cancelling drafter"), flag_(flag), cancel_round_(cancel_round) {}
  Draft draft(const DraftRequest& request) const override {
    if (session_ && session_->currentRound() >= cancel_round_ && !fired_) {
      fired_ = true;  // once: a resumed run is not cancelled again
      flag_->store(true);
      cancelled_in_phase_ = session_->nextPhase();
    }
    return ModelDrafter::draft(request);
  }
  void attach(const Session* session) const { session_ = session; }
  mutable Phase cancelled_in_phase_ = Phase::Prefill;

 private:
  std::atomic<bool>* flag_;
  int64_t cancel_round_;
  mutable const Session* session_ = nullptr;
  mutable bool fired_ = false;
};

TEST(SessionCancel, AlreadySetFlagDoesNothing) {
  std::atomic<bool> cancel{true};
  const std::vector<int64_t> prompt = {1, 377, 397, 319};
  Session session(fixtureModel("llama-tiny"), modelDrafter(), prompt, fastOptions(3, 10, true, greedySettings()), {2});
  session.runToEnd(&cancel);
  EXPECT_FALSE(session.finished());
  EXPECT_TRUE(session.rounds().empty());
  EXPECT_EQ(session.nextPhase(), Phase::Prefill);
  EXPECT_EQ(session.sequence(), prompt);
  EXPECT_TRUE(session.ledger().entries().empty());
  EXPECT_EQ(session.targetCache()->length(), 0);
  EXPECT_EQ(session.drafterCache()->length(), 0);
}

TEST(SessionCancel, FlagSetDuringARunStopsAtThePhaseBoundaryAndCanResume) {
  const std::vector<int64_t> prompt = {1, 377, 397, 319};
  const SessionOptions o = fastOptions(3, 20, true, sampledSettings(0.9), 12);
  Session reference(fixtureModel("llama-tiny"), modelDrafter(), prompt, o, {2});
  reference.runToEnd();
  ASSERT_TRUE(reference.finished());
  ASSERT_GT(reference.rounds().size(), 5u);

  std::atomic<bool> cancel{false};
  auto drafter = std::make_shared<CancellingDrafter>(fixtureModel("llama-tiny-draft"), &cancel, 3);
  Session session(fixtureModel("llama-tiny"), drafter, prompt, o, {2});
  drafter->attach(&session);
  session.runToEnd(&cancel);
  ASSERT_TRUE(cancel.load());
  // Raised inside round 3's draft phase: the phase completes, nothing more runs.
  EXPECT_EQ(drafter->cancelled_in_phase_, Phase::Draft);
  EXPECT_FALSE(session.finished());
  EXPECT_EQ(session.currentRound(), 3);
  EXPECT_EQ(session.nextPhase(), Phase::Verify);
  ASSERT_EQ(session.rounds().size(), 4u);
  EXPECT_EQ(session.rounds()[3].target_forwards, 0);
  EXPECT_LT(session.generated().size(), reference.generated().size());
  // Calling again with the flag still set does nothing.
  const auto entries = session.ledger().entries().size();
  session.runToEnd(&cancel);
  EXPECT_EQ(session.ledger().entries().size(), entries);
  EXPECT_EQ(session.nextPhase(), Phase::Verify);
  // Resumed, it finishes exactly like the uninterrupted run.
  cancel = false;
  session.runToEnd(&cancel);
  EXPECT_TRUE(session.finished());
  EXPECT_EQ(session.generated(), reference.generated());
}

TEST(SessionStepping, PhasesRoundsAndFinishedSessionsAreInert) {
  SessionOptions o = fastOptions(2, 6, true, greedySettings());
  o.ignore_eos = true;
  Session session(fixtureModel("llama-tiny"), modelDrafter(), {1, 377, 397}, o, {2});
  EXPECT_EQ(session.nextPhase(), Phase::Prefill);
  EXPECT_EQ(session.currentRound(), 0);
  session.stepPhase();
  EXPECT_EQ(session.currentRound(), 1);
  const Phase order[] = {Phase::Draft, Phase::Verify, Phase::Accept, Phase::Prune};
  for (Phase expected : order) {
    EXPECT_EQ(session.nextPhase(), expected);
    session.stepPhase();
  }
  EXPECT_EQ(session.currentRound(), 2);
  EXPECT_EQ(session.nextPhase(), Phase::Draft);
  session.stepPhase();  // draft of round 2 ...
  session.stepRound();  // ... and stepRound completes that round only
  EXPECT_EQ(session.currentRound(), 3);
  EXPECT_EQ(session.rounds().size(), 3u);
  session.runToEnd();
  ASSERT_TRUE(session.finished());
  const auto sequence = session.sequence();
  const auto rounds = session.rounds().size();
  session.stepPhase();
  session.stepRound();
  session.runToEnd();
  EXPECT_EQ(session.sequence(), sequence);
  EXPECT_EQ(session.rounds().size(), rounds);
  // Origins: prompt, then accepted drafts / corrections / bonus tokens as the rounds say.
  const auto& origins = session.origins();
  ASSERT_EQ(origins.size(), sequence.size());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(origins[i], TokenOrigin::Prompt);
  size_t at = 3;
  for (const auto& r : session.rounds()) {
    if (r.index == 0) continue;
    for (int64_t i = 0; i < r.accepted; ++i) EXPECT_EQ(origins[at++], TokenOrigin::AcceptedDraft);
    EXPECT_EQ(origins[at++], r.bonus ? TokenOrigin::Bonus : TokenOrigin::Correction);
  }
  EXPECT_EQ(at, sequence.size());
}

// --- metrics ------------------------------------------------------------------------

TEST(SessionMetrics, AgreeWithTheRounds) {
  SessionOptions o = fastOptions(3, 30, true, sampledSettings(1.0), 8);
  o.ignore_eos = true;
  Session session(fixtureModel("llama-tiny"), modelDrafter(), {1, 377, 397}, o, {2});
  session.runToEnd();
  const Metrics m = session.metrics();
  int64_t drafted = 0, accepted = 0, target = 0, drafter = 0;
  for (const auto& r : session.rounds()) {
    drafted += static_cast<int64_t>(r.drafts.size());
    accepted += r.accepted;
    target += r.target_forwards;
    drafter += r.drafter_forwards;
  }
  EXPECT_EQ(m.rounds, static_cast<int64_t>(session.rounds().size()) - 1);
  EXPECT_EQ(m.generated, 30);
  EXPECT_EQ(m.drafted, drafted);
  EXPECT_EQ(m.accepted, accepted);
  EXPECT_DOUBLE_EQ(m.alpha, static_cast<double>(accepted) / static_cast<double>(drafted));
  EXPECT_DOUBLE_EQ(m.mean_accepted_length, 30.0 / static_cast<double>(m.rounds));  // includes the bonus/correction
  EXPECT_EQ(m.target_forwards, target);
  EXPECT_EQ(m.target_forwards, m.rounds + 1);  // one verify per round + the prefill
  EXPECT_EQ(m.drafter_forwards, drafter);
  EXPECT_EQ(m.drafter_forwards, drafted + 1);  // one per draft + the prefill
  ASSERT_FALSE(m.acceptance_at_position.empty());
  for (size_t i = 0; i < m.acceptance_at_position.size(); ++i) {
    EXPECT_DOUBLE_EQ(m.acceptance_at_position[i], static_cast<double>(m.accepted_at_position[i]) /
                                                      static_cast<double>(m.drafted_at_position[i]));
  }
  int64_t rounds_with_drafts = 0;
  for (const auto& r : session.rounds()) rounds_with_drafts += !r.drafts.empty();
  EXPECT_EQ(m.drafted_at_position[0], rounds_with_drafts);
  const double a = m.alpha, g = m.mean_gamma, c = m.cost_ratio;
  EXPECT_NEAR(m.theoretical_speedup, (1 - std::pow(a, g + 1)) / ((1 - a) * (g * c + 1)), 1e-12);
  EXPECT_GT(c, 0.0);
  EXPECT_NEAR(theoreticalSpeedup(1.0, 4, 0.0), 5.0, 1e-12);
  EXPECT_NEAR(theoreticalSpeedup(0.0, 4, 0.1), 1.0 / 1.4, 1e-12);
  // The verify pass priced at its measured cost: 1 step is the formula itself.
  EXPECT_NEAR(speedupWithVerifyCost(a, g, c, 1.0), m.theoretical_speedup, 1e-12);
  EXPECT_NEAR(speedupWithVerifyCost(1.0, 4, 0.0, 1.25), 4.0, 1e-12);
  EXPECT_NEAR(speedupWithVerifyCost(0.5, 1, 0.25, 1.25), 1.5 / 1.5, 1e-12);
}

}  // namespace
}  // namespace kvscope
