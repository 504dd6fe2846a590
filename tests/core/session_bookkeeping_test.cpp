// After every round (and every phase) each cache
// holds exactly as many entries as it has valid tokens for (docs/architecture.md,
// "Speculative rounds, exactly": target L'-1, drafter
// min(its length, L'-1); the seed variant keeps L'-2), the ledger agrees
// with the caches (live count, positions 0..len-1 once each, tokens,
// bit-identical K/V rows), and every accepted count n in [0, gamma] occurs.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <gtest/gtest-spi.h>

#include "core/cache/fault.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

constexpr int64_t kGamma = 4;

int64_t lengthOf(const KvCache* cache) { return cache ? cache->length() : 0; }

struct Scenario {
  std::string name;
  std::string drafter;  // model name, "self" (llama-tiny drafting for itself) or "ngram"
  SamplingSettings sampling;
  int64_t max_new;
};

std::shared_ptr<const Drafter> makeDrafter(const std::string& kind) {
  if (kind == "ngram") return std::make_shared<NgramDrafter>(3);
  // "self": a separate instance of the target's weights. Its q equals the
  // target's p up to float noise, so sampled drafts are (almost) always accepted.
  if (kind == "self") return std::make_shared<ModelDrafter>(freshModel("llama-tiny"), "llama-tiny (self)");
  return std::make_shared<ModelDrafter>(fixtureModel(kind), kind);
}

std::vector<std::vector<int64_t>> scenarioPrompts() {
  auto prompts = randomPrompts(3, 512, 1, 24, /*seed=*/777);
  prompts.push_back(fixtureTokenizer("llama-tiny")->encode("Once upon a time"));
  return prompts;
}

// Steps `session` to the end one phase (or one round) at a time and checks the
// caches and the ledger after each step. Adds the accepted count of every
// round that drafted all kGamma tokens to `accepted_counts`.
void runChecked(Session& session, bool by_phase, std::set<int64_t>* accepted_counts, const std::string& label) {
  const bool exact = session.options().bookkeeping == Bookkeeping::Exact;
  const bool model_drafter = session.drafter() && session.drafter()->model();
  const int64_t prompt_length = session.promptLength();
  int64_t round_target_start = 0, round_drafter_start = 0;  // cache lengths when the round began
  while (!session.finished()) {
    const int64_t round = session.currentRound();
    const Phase phase = session.nextPhase();
    const int64_t length_before = static_cast<int64_t>(session.sequence().size());
    const int64_t target_before = lengthOf(session.targetCache());
    const int64_t drafter_before = lengthOf(session.drafterCache());
    const bool round_begins = phase == Phase::Draft;  // stepRound also starts at the draft phase
    if (round_begins) {
      round_target_start = target_before;
      round_drafter_start = drafter_before;
    }
    const std::string where = label + ", round " + std::to_string(round) + ", after " +
                              (by_phase ? std::string(phaseName(phase)) : std::string("the round"));
    if (by_phase) {
      session.stepPhase();
    } else {
      session.stepRound();
    }
    const int64_t target_len = lengthOf(session.targetCache());
    const int64_t drafter_len = lengthOf(session.drafterCache());
    ASSERT_NE(session.targetCache(), nullptr);
    ASSERT_EQ(session.drafterCache() != nullptr, model_drafter);

    if (phase == Phase::Prefill) {
      // Every prompt token but the last.
      EXPECT_EQ(target_len, prompt_length - 1) << where;
      if (model_drafter) EXPECT_EQ(drafter_len, prompt_length - 1) << where;
      EXPECT_EQ(session.currentRound(), 1) << where;
    } else {
      const RoundRecord& r = session.rounds().at(static_cast<size_t>(round));
      ASSERT_EQ(r.index, round);
      const int64_t L = r.start_length;
      const int64_t k = static_cast<int64_t>(r.drafts.size());
      if (round_begins) {
        EXPECT_EQ(L, length_before) << where;
        // At round start: L-1 entries (exact; and after the prefill) or L-2
        // (seed, from round 2 on: the missing token is re-fed).
        const int64_t start_entries = exact || round == 1 ? L - 1 : L - 2;
        EXPECT_EQ(round_target_start, start_entries) << where << " (target at round start)";
        if (model_drafter) EXPECT_LE(round_drafter_start, start_entries) << where << " (drafter at round start)";
      }
      // The drafter after drafting: caught up and fed x[L-1], d1 .. d_{k-1}.
      const int64_t drafter_after_draft = model_drafter && k > 0 ? L - 1 + k : round_drafter_start;
      if (by_phase) {
        switch (phase) {
          case Phase::Draft:
            EXPECT_EQ(target_len, target_before) << where;
            EXPECT_EQ(drafter_len, drafter_after_draft) << where << " (drafter after drafting " << k << ")";
            break;
          case Phase::Verify:
            EXPECT_EQ(target_len, L + k) << where << " (target fed x[L-1] and " << k << " drafts)";
            EXPECT_EQ(drafter_len, drafter_before) << where;
            break;
          case Phase::Accept:
            EXPECT_EQ(target_len, target_before) << where;
            EXPECT_EQ(drafter_len, drafter_before) << where;
            EXPECT_EQ(static_cast<int64_t>(session.sequence().size()), L + r.accepted + 1) << where;
            break;
          default: break;
        }
      }
      const bool round_done = !by_phase || phase == Phase::Prune;
      if (round_done) {
        const int64_t new_length = static_cast<int64_t>(session.sequence().size());  // L'
        EXPECT_EQ(new_length, L + r.accepted + 1) << where;
        const int64_t keep = exact ? new_length - 1 : new_length - 2;
        EXPECT_EQ(target_len, keep) << where << " (target after prune, n = " << r.accepted << " of " << k << ")";
        if (model_drafter) {
          EXPECT_EQ(drafter_len, std::min(drafter_after_draft, keep))
              << where << " (drafter after prune, n = " << r.accepted << " of " << k << ")";
          if (exact && k > 0) {
            // The design's counts: the drafter drops k - n - 1 (none when n = k).
            EXPECT_EQ(drafter_after_draft - drafter_len, std::max<int64_t>(k - r.accepted - 1, 0)) << where;
          }
        }
        if (exact) EXPECT_EQ((L + k) - target_len, k - r.accepted) << where << " (target drops gamma - n)";
        // The prune's logged cache operations say the same, and what was required.
        for (const CacheEvent& e : session.events().events()) {
          if (e.round != r.index || e.kind != CacheEventKind::Crop) continue;
          EXPECT_EQ(e.rows_after.front(), keep) << where;
          EXPECT_EQ(e.expected_rows, keep) << where;
          EXPECT_GT(e.rows_before.front(), e.rows_after.front()) << where;
        }
        if (accepted_counts && k == kGamma) accepted_counts->insert(r.accepted);
      }
    }
    // Mid-round the caches also hold drafts beyond the committed sequence.
    std::vector<int64_t> tokens = session.sequence();
    const bool mid_round = by_phase && phase != Phase::Prefill && phase != Phase::Prune;
    if (mid_round) {
      const RoundRecord& r = session.rounds().back();
      tokens.assign(session.sequence().begin(), session.sequence().begin() + r.start_length);
      tokens.insert(tokens.end(), r.drafts.begin(), r.drafts.end());
    }
    expectLedgerMatchesCache(session, CacheRole::Target, where, &tokens);
    expectLedgerMatchesCache(session, CacheRole::Drafter, where, &tokens);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Death reasons: exact bookkeeping only ever cuts rows computed from a
  // rejected draft; the seed variant also cuts correct rows to re-feed them.
  int64_t refeeds = 0;
  for (const LedgerEntry& e : session.ledger().entries()) {
    if (e.died_round >= 0) {
      EXPECT_NE(e.reason, DeathReason::Alive) << label;
      EXPECT_EQ(e.died_phase, Phase::Prune) << label;
      EXPECT_GE(e.died_round, e.born_round) << label;
    }
    if (e.reason == DeathReason::Refeed) ++refeeds;
  }
  if (exact) EXPECT_EQ(refeeds, 0) << label;
  if (!exact && session.rounds().size() > 2) EXPECT_GT(refeeds, 0) << label;
}

std::set<int64_t> runScenario(const Scenario& s, Bookkeeping bookkeeping, bool by_phase) {
  const auto target = fixtureModel("llama-tiny");
  const auto drafter = makeDrafter(s.drafter);
  std::set<int64_t> counts;
  const auto prompts = scenarioPrompts();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionOptions o = fastOptions(kGamma, s.max_new, /*use_cache=*/true, s.sampling, /*seed=*/42 + i);
    o.bookkeeping = bookkeeping;
    o.ignore_eos = true;
    Session session(target, drafter, prompts[i], o, {2});
    runChecked(session, by_phase, &counts,
               s.name + " " + bookkeepingName(bookkeeping) + " prompt " + idsToString(prompts[i]));
    if (::testing::Test::HasFatalFailure()) break;
    EXPECT_EQ(static_cast<int64_t>(session.generated().size()), s.max_new);
  }
  return counts;
}

std::string countsString(const std::set<int64_t>& counts) {
  std::string out;
  for (int64_t n : counts) out += std::to_string(n) + " ";
  return out;
}

const Scenario kDraftGreedy{"llama-tiny-draft greedy", "llama-tiny-draft", greedySettings(), 24};
const Scenario kDraftSampled{"llama-tiny-draft sampled", "llama-tiny-draft", sampledSettings(1.0), 24};
const Scenario kSelfSampled{"llama-tiny self-drafted sampled", "self", sampledSettings(1.0), 30};
const Scenario kNgramGreedy{"n-gram greedy", "ngram", greedySettings(), 40};

TEST(SessionBookkeeping, ModelDrafterGreedyByRound) {
  const auto counts = runScenario(kDraftGreedy, Bookkeeping::Exact, /*by_phase=*/false);
  EXPECT_TRUE(counts.count(0)) << countsString(counts);
}

TEST(SessionBookkeeping, ModelDrafterSampledByPhase) {
  const auto counts = runScenario(kDraftSampled, Bookkeeping::Exact, /*by_phase=*/true);
  EXPECT_TRUE(counts.count(0)) << countsString(counts);
}

TEST(SessionBookkeeping, SelfDrafterAcceptsEverythingByPhase) {
  const auto counts = runScenario(kSelfSampled, Bookkeeping::Exact, /*by_phase=*/true);
  EXPECT_TRUE(counts.count(kGamma)) << countsString(counts);  // catch-up rounds exercised
}

TEST(SessionBookkeeping, NgramDrafterByRoundAndByPhase) {
  const auto by_round = runScenario(kNgramGreedy, Bookkeeping::Exact, /*by_phase=*/false);
  const auto by_phase = runScenario(kNgramGreedy, Bookkeeping::Exact, /*by_phase=*/true);
  EXPECT_EQ(by_round, by_phase);
  EXPECT_TRUE(by_round.count(kGamma)) << countsString(by_round);
}

TEST(SessionBookkeeping, SeedVariantByRoundAndByPhase) {
  for (const Scenario& s : {kDraftGreedy, kSelfSampled, kNgramGreedy}) {
    SCOPED_TRACE(s.name);
    runScenario(s, Bookkeeping::Seed, /*by_phase=*/false);
    runScenario(s, Bookkeeping::Seed, /*by_phase=*/true);
  }
}

TEST(SessionBookkeeping, EveryAcceptedCountAtGamma4IsExercised) {
  std::set<int64_t> all;
  for (const Scenario& s : {kDraftGreedy, kDraftSampled, kSelfSampled, kNgramGreedy}) {
    const auto counts = runScenario(s, Bookkeeping::Exact, /*by_phase=*/true);
    std::cout << "[ info ] " << s.name << ": accepted counts at gamma 4: " << countsString(counts) << "\n";
    all.insert(counts.begin(), counts.end());
  }
  EXPECT_EQ(all, (std::set<int64_t>{0, 1, 2, 3, 4})) << countsString(all);
}

// Adaptive gamma moves the cache bookkeeping through many gamma values.
TEST(SessionBookkeeping, AdaptiveGammaByPhase) {
  const auto target = fixtureModel("llama-tiny");
  for (const char* kind : {"self", "llama-tiny-draft"}) {
    SessionOptions o = fastOptions(3, 30, true, sampledSettings(1.0), 5);
    o.adaptive_gamma = true;
    o.gamma_min = 1;
    o.gamma_max = 7;
    o.ignore_eos = true;
    Session session(target, makeDrafter(kind), {1, 377, 397}, o, {2});
    runChecked(session, /*by_phase=*/true, nullptr, std::string("adaptive ") + kind);
  }
}

// The checker can fail: every injected fault that breaks the caches'
// bookkeeping (core/cache/fault.h) makes it report errors. (stale-rope and
// half-cache keep the lengths right; they are the cache audit's business.)
TEST(SessionBookkeeping, CheckerCatchesInjectedCacheBugs) {
  const std::set<std::string> must_catch = {"no-prune",           "prune-short",        "prune-long-no-refeed",
                                            "reset-not-rollback", "crop-zero-noop",     "partial-layer-crop",
                                            "full-prefix-with-cache", "drafter-not-pruned"};
  const auto target = fixtureModel("llama-tiny");
  const auto drafter = makeDrafter("llama-tiny-draft");
  std::set<std::string> caught;
  for (const std::string& name : must_catch) {
    SessionOptions o = fastOptions(kGamma, 16, /*use_cache=*/true, greedySettings(), 1);
    o.ignore_eos = true;
    o.fault = parseFault(name);
    ::testing::TestPartResultArray failures;
    bool threw = false;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      try {
        Session session(target, drafter, {1, 377, 397, 319}, o, {2});
        runChecked(session, /*by_phase=*/true, nullptr, name);
      } catch (const std::exception&) {
        threw = true;  // an engine that notices its own broken cache also counts
      }
    }
    std::cout << "[ info ] fault " << name << ": " << failures.size() << " check failures" << (threw ? ", threw" : "")
              << "\n";
    if (failures.size() > 0 || threw) caught.insert(name);
  }
  EXPECT_EQ(caught, must_catch);
  // And without a fault the same runs are clean (checked in the tests above).
}

}  // namespace
}  // namespace kvscope
