// Greedy speculative decoding is token for token the
// greedy target-only output (generateAutoregressive) over many prompts, every
// gamma in {1, 2, 4, 8}, both drafters, cache on and off; and it reproduces
// Hugging Face's reference runs in tests/fixtures/greedy round by round.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cctype>
#include <iostream>

#include "core/cache/fault.h"
#include "core/model/scoring.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

constexpr int64_t kMaxNew = 12;
// >= 50 prompts for a 512-id model: seeded random ids of lengths 1..40 plus
// real text (the tokenizer fixture's strings through our tokenizer).
std::vector<std::vector<int64_t>> promptsFor(const std::string& model, const std::string& encodings) {
  auto prompts = randomPrompts(34, 512, 1, 40, /*seed=*/20260301);
  for (auto& p : textPrompts(encodings, model, 40)) prompts.push_back(p);
  return prompts;
}

struct GreedyCase {
  std::string target;
  std::string drafter;  // a model name, or "ngram"
  int64_t gamma;
};

void PrintTo(const GreedyCase& c, std::ostream* out) {
  *out << c.target << " + " << c.drafter << ", gamma " << c.gamma;
}

class GreedyEqualsTarget : public ::testing::TestWithParam<GreedyCase> {};

TEST_P(GreedyEqualsTarget, TokenForTokenOverManyPrompts) {
  const GreedyCase& param = GetParam();
  const auto target = fixtureModel(param.target);
  std::shared_ptr<const Drafter> drafter;
  if (param.drafter == "ngram") {
    drafter = std::make_shared<NgramDrafter>(3);
  } else {
    drafter = std::make_shared<ModelDrafter>(fixtureModel(param.drafter), param.drafter);
  }
  const std::vector<int64_t> eos = target->config().eos_token_ids;
  ASSERT_FALSE(eos.empty());
  const auto prompts = promptsFor(param.target, param.target);
  ASSERT_GE(prompts.size(), 50u);

  int ties = 0, sessions = 0, drafted = 0, accepted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    GenerateOptions g;
    g.max_new_tokens = kMaxNew;
    g.sampling = greedySettings();
    const auto reference = generateAutoregressive(*target, prompt, g, eos).ids;
    for (bool use_cache : {true, false}) {
      Session session(target, drafter, prompt, fastOptions(param.gamma, kMaxNew, use_cache, greedySettings()), eos);
      session.runToEnd();
      ++sessions;
      ASSERT_TRUE(session.finished());
      const std::string label = "prompt " + std::to_string(i) + " " + idsToString(prompt) + " cache " +
                                (use_cache ? "on" : "off");
      expectSameTokens(*target, prompt, reference, session.generated(), label, &ties);
      // The round records tell the same story as the sequence.
      std::vector<int64_t> emitted;
      for (const RoundRecord& r : session.rounds()) {
        if (r.index == 0) continue;
        EXPECT_LE(static_cast<int64_t>(r.drafts.size()), param.gamma);
        emitted.insert(emitted.end(), r.emitted.begin(), r.emitted.end());
        drafted += static_cast<int>(r.drafts.size());
        accepted += static_cast<int>(r.accepted);
      }
      EXPECT_EQ(emitted, session.generated()) << label;
    }
  }
  std::cout << "[ info ] " << param.target << " + " << param.drafter << " gamma " << param.gamma << ": " << sessions
            << " sessions, drafted " << drafted << ", accepted " << accepted << ", float ties " << ties << "\n";
  EXPECT_GT(drafted, 0);
  // Ties are excused, but must stay rare, or the comparison would prove nothing.
  EXPECT_LE(ties, sessions / 50);
}

std::vector<GreedyCase> greedyCases() {
  std::vector<GreedyCase> cases;
  for (const char* drafter : {"llama-tiny-draft", "ngram"}) {
    for (int64_t gamma : {1, 2, 4, 8}) cases.push_back({"llama-tiny", drafter, gamma});
  }
  for (int64_t gamma : {1, 2, 4, 8}) cases.push_back({"gpt2-tiny", "ngram", gamma});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Session, GreedyEqualsTarget, ::testing::ValuesIn(greedyCases()),
                         [](const ::testing::TestParamInfo<GreedyCase>& info) {
                           std::string name = info.param.target + "_" + info.param.drafter + "_gamma" +
                                              std::to_string(info.param.gamma);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The comparison can fail: with a cache bug injected (core/cache/fault.h)
// the same comparison finds differing outputs.
TEST(GreedyEqualsTargetControl, InjectedCacheBugsChangeTheOutput) {
  const auto target = fixtureModel("llama-tiny");
  const auto drafter = std::make_shared<NgramDrafter>(3);
  const auto prompts = randomPrompts(10, 512, 4, 30, /*seed=*/99);
  for (const char* fault : {"no-prune", "prune-short", "stale-rope"}) {
    int differing = 0;
    for (const auto& prompt : prompts) {
      GenerateOptions g;
      g.max_new_tokens = kMaxNew;
      g.ignore_eos = true;
      const auto reference = generateAutoregressive(*target, prompt, g, {}).ids;
      SessionOptions o = fastOptions(4, kMaxNew, true, greedySettings());
      o.ignore_eos = true;
      o.fault = parseFault(fault);
      Session session(target, drafter, prompt, o, {});
      session.runToEnd();
      if (session.generated() != reference) ++differing;
    }
    std::cout << "[ info ] fault " << fault << ": " << differing << " of " << prompts.size()
              << " outputs differ from the target-only output\n";
    EXPECT_GT(differing, 0) << fault;
  }
}

// --- Hugging Face's reference runs ---------------------------------------

class GreedyFixture : public ::testing::TestWithParam<bool> {};  // param: use_cache

TEST_P(GreedyFixture, MatchesHuggingFaceRoundByRound) {
  const bool use_cache = GetParam();
  const auto doc = readJson(fixturesDir() / "greedy" / "llama-tiny+llama-tiny-draft.json");
  const auto target = fixtureModel("llama-tiny");
  const auto drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "llama-tiny-draft");
  ASSERT_EQ(doc["cases"].size(), 2u);
  for (const auto& c : doc["cases"]) {
    const std::string name = c["prompt_name"].get<std::string>();
    SCOPED_TRACE(name + (use_cache ? " cache on" : " cache off"));
    const auto prompt = c["ids"].get<std::vector<int64_t>>();
    const int64_t n = c["n"].get<int64_t>();
    const auto expected = c["generated"].get<std::vector<int64_t>>();
    ASSERT_EQ(c["assisted_generated"].get<std::vector<int64_t>>(), expected);
    ASSERT_EQ(c["num_assistant_tokens"].get<int64_t>(), 4);
    ASSERT_GT(prompt.size(), 1u);
    // The prompt text goes through our tokenizer to the same ids.
    EXPECT_EQ(fixtureTokenizer("llama-tiny")->encode(c["prompt_text"].get<std::string>()), prompt);

    // Target only.
    GenerateOptions g;
    g.max_new_tokens = n;
    g.ignore_eos = true;  // the fixture never stops early
    g.use_cache = use_cache;
    const auto plain = generateAutoregressive(*target, prompt, g, {2});
    EXPECT_EQ(plain.ids, expected);
    EXPECT_EQ(plain.forward_calls, c["target_forward_calls"].get<int64_t>());

    // Speculative, gamma 4 (HF's constant schedule).
    SessionOptions o = fastOptions(4, n, use_cache, greedySettings());
    o.ignore_eos = true;
    o.record_logits = true;
    Session session(target, drafter, prompt, o, {2});
    session.runToEnd();
    ASSERT_TRUE(session.finished());
    EXPECT_EQ(session.generated(), expected);

    const auto& rounds = c["rounds"];
    ASSERT_EQ(static_cast<int64_t>(session.rounds().size()), c["num_rounds"].get<int64_t>() + 1);  // + prefill
    for (size_t i = 0; i < rounds.size(); ++i) {
      const auto& want = rounds[i];
      const RoundRecord& got = session.rounds()[i + 1];
      SCOPED_TRACE("round " + std::to_string(i + 1));
      EXPECT_EQ(got.start_length, want["start_len"].get<int64_t>());
      EXPECT_EQ(got.drafts, want["drafts"].get<std::vector<int64_t>>());
      EXPECT_EQ(got.accepted, want["accepted"].get<int64_t>());
      EXPECT_EQ(got.next_token, want["next_token"].get<int64_t>());
      EXPECT_EQ(got.bonus, want["bonus"].get<bool>());
      EXPECT_FALSE(want["draft_stopped_at_eos"].get<bool>());
      // The verify pass scored exactly HF's positions, with HF's argmax.
      const auto& verify = session.verifyRecords().at(got.index);
      EXPECT_EQ(verify.first_query_position, got.start_length - 1);
      const auto argmax = verify.logits.argmax(1).contiguous();
      const std::vector<int64_t> got_argmax(argmax.data_ptr<int64_t>(), argmax.data_ptr<int64_t>() + argmax.numel());
      EXPECT_EQ(got_argmax, want["target_argmax"].get<std::vector<int64_t>>());
    }

    // Call counts: HF's plus our separate prefill forward (target always;
    // the drafter too, the prompt having more than one token). Without the
    // cache there is no prefill forward: every verify recomputes everything.
    const Metrics m = session.metrics();
    const int64_t prefill = use_cache ? 1 : 0;
    EXPECT_EQ(m.target_forwards, c["assisted_target_forward_calls"].get<int64_t>() + prefill);
    EXPECT_EQ(m.drafter_forwards, c["drafted_total"].get<int64_t>() + prefill);
    EXPECT_EQ(c["assistant_forward_calls"].get<int64_t>(), c["drafted_total"].get<int64_t>());
    EXPECT_EQ(m.drafted, c["drafted_total"].get<int64_t>());
    EXPECT_EQ(m.accepted, c["accepted_total"].get<int64_t>());
    EXPECT_EQ(m.rounds, c["num_rounds"].get<int64_t>());
    EXPECT_EQ(m.generated, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Session, GreedyFixture, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "CacheOn" : "CacheOff");
                         });

}  // namespace
}  // namespace kvscope
