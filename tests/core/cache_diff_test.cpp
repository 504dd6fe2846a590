// The diff and the audit against the bug zoo: every fault is flagged by the
// lockstep diff and located by the audit at the round, layer and position
// where it acted; without faults nothing diverges over a whole context.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "core/audit/cache_audit.h"
#include "core/audit/cache_diff.h"
#include "core/cache/fault.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/causal_lm.h"

namespace kvscope {
namespace {

const std::string kModels = std::string(KVSCOPE_FIXTURES) + "/models/";

std::shared_ptr<const CausalLM> model(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const CausalLM>> cache;
  auto& slot = cache[name];
  if (!slot) slot = loadCausalLM(kModels + name, torch::kFloat32);
  return slot;
}

// "Once upon a time" in the llama-tiny tokenizer, BOS included.
const std::vector<int64_t> kPrompt = {1, 377, 397, 319, 310, 406, 265, 261, 259, 349, 392};

std::unique_ptr<Session> makeSession(Fault fault, int64_t gamma, int64_t max_new, bool greedy = true,
                                     uint64_t seed = 0) {
  SessionOptions o;
  o.gamma = gamma;
  o.max_new_tokens = max_new;
  o.ignore_eos = true;
  o.fault = fault;
  o.seed = seed;
  o.record_attention = false;
  o.sampling.greedy = greedy;
  o.sampling.temperature = 0.8;
  auto drafter = std::make_shared<ModelDrafter>(model("llama-tiny-draft"));
  return std::make_unique<Session>(model("llama-tiny"), drafter, kPrompt, o, std::vector<int64_t>{2});
}

TEST(FaultZooHalfCache, IsNoiseNotDivergence) {
  auto session = makeSession(Fault::HalfCache, 4, 48);
  const DiffReport report = diffLockstep(*session);
  EXPECT_FALSE(report.diverged());
  EXPECT_GT(report.noise, 0);             // the drift is there and is seen...
  EXPECT_LT(report.max_abs_logit_diff, 0.05);  // ...and it is small
  EXPECT_EQ(session->targetCache()->storageDtype(), torch::kFloat16);
  // The contract is still broken (stored != computed), so the diff fails
  // with the prefill's append as the root cause.
  EXPECT_TRUE(report.failed());
  ASSERT_TRUE(report.root_cause.has_value());
  EXPECT_EQ(report.root_cause->round, 0);
  EXPECT_EQ(report.root_cause->operation, CacheEventKind::Append);
}

TEST(FaultNames, ParseAndList) {
  EXPECT_EQ(allFaults().size(), 18u);
  for (const FaultInfo& f : allFaults()) EXPECT_EQ(parseFault(f.name), f.fault);
  EXPECT_THROW(parseFault("no-such-fault"), Error);
}

TEST(DiffClassification, AgreeNoiseDivergent) {
  auto logits = torch::tensor({3.0f, 1.0f, 0.5f});
  EXPECT_EQ(comparePosition(logits, logits, {}).verdict, PositionClass::Agree);
  EXPECT_EQ(comparePosition(logits + torch::tensor({0.01f, 0.f, 0.f}), logits, {}).verdict, PositionClass::Noise);
  EXPECT_EQ(comparePosition(logits + torch::tensor({0.5f, 0.f, 0.f}), logits, {}).verdict, PositionClass::Divergent);
  // A flip inside the margin is noise; outside it, divergence.
  auto close = torch::tensor({1.0f, 0.999f, 0.f});
  EXPECT_EQ(comparePosition(torch::tensor({0.999f, 1.0f, 0.f}), close, {}).verdict, PositionClass::Noise);
  EXPECT_EQ(comparePosition(torch::tensor({0.f, 3.0f, 0.f}), logits, {}).verdict, PositionClass::Divergent);
}

// No fault: zero divergent positions over a whole 256-position context
// (1-token prompt + 255 generated), gamma 1..8, greedy and sampled.
struct CleanCase {
  std::string target, drafter;  // drafter "" = n-gram
  bool greedy;
};

class CleanRuns : public ::testing::TestWithParam<CleanCase> {};

TEST_P(CleanRuns, NoDivergenceOverWholeContext) {
  const CleanCase& c = GetParam();
  for (int64_t gamma = 1; gamma <= 8; ++gamma) {
    SessionOptions o;
    o.gamma = gamma;
    o.max_new_tokens = 255;
    o.ignore_eos = true;
    o.record_attention = false;
    o.sampling.greedy = c.greedy;
    o.sampling.temperature = 0.9;
    o.seed = 100 + gamma;
    std::shared_ptr<const Drafter> drafter;
    if (c.drafter.empty()) drafter = std::make_shared<NgramDrafter>(3);
    else drafter = std::make_shared<ModelDrafter>(model(c.drafter));
    Session session(model(c.target), drafter, {model(c.target)->config().bos_token_ids.at(0)}, o, {});
    const DiffReport report = diffLockstep(session);
    EXPECT_FALSE(report.diverged()) << "gamma " << gamma;
    EXPECT_FALSE(report.root_cause.has_value()) << "gamma " << gamma << ": " << report.root_cause->what;
    EXPECT_EQ(report.divergent, 0) << "gamma " << gamma;
    EXPECT_EQ(static_cast<int64_t>(session.sequence().size()), 256);
    EXPECT_LT(report.max_abs_logit_diff, 1e-4) << "gamma " << gamma;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CleanRuns,
                         ::testing::Values(CleanCase{"llama-tiny", "llama-tiny-draft", true},
                                           CleanCase{"llama-tiny", "llama-tiny-draft", false},
                                           CleanCase{"gpt2-tiny", "", true}, CleanCase{"gpt2-tiny", "", false},
                                           CleanCase{"qwen2-tiny", "", true}, CleanCase{"qwen2-tiny", "", false}),
                         [](const auto& info) {
                           std::string name = info.param.target + (info.param.drafter.empty() ? "_ngram" : "_model") +
                                              (info.param.greedy ? "_greedy" : "_sampled");
                           for (char& ch : name) ch = isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

}  // namespace
}  // namespace kvscope
