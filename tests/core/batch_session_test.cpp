// Several sequences decoded together (core/decode/batch_session.h): the
// batched forward gives each sequence the logits its own forward gives; a
// batched greedy run gives every row the tokens that row decoded alone gives,
// for batches of 1, 2, 3 and 8 with prompts of different lengths; rows accept
// different numbers of drafts in one round; the batcher really joins the
// forwards.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "core/audit/batch_diff.h"
#include "core/cache/block_table.h"
#include "core/audit/root_cause.h"
#include "core/audit/row_history.h"
#include "core/control/session_controller.h"
#include "core/control/trace_capture.h"
#include "core/decode/batch_session.h"
#include "core/model/bundled_models.h"
#include "core/model/safetensors.h"
#include "core/model/scoring.h"
#include "core/trace/trace_file.h"
#include "core/trace/trace_json.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

std::string batchTracePath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvscope_batch_" + name + "_" + std::to_string(::getpid()) + ".kvtrace"))
      .string();
}

SessionOptions greedyOptions(int64_t gamma, int64_t max_new) {
  SessionOptions options;
  options.gamma = gamma;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  options.record_attention = false;
  return options;
}

std::vector<int64_t> decodeAlone(const std::shared_ptr<const CausalLM>& target, const std::shared_ptr<const Drafter>& drafter,
                                 const std::vector<int64_t>& prompt, const SessionOptions& options) {
  Session session(target, drafter, prompt, options, {});
  session.runToEnd();
  return session.generated();
}

struct Pair {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const Drafter> drafter;
};

Pair fixturePair() {
  return {fixtureModel("llama-tiny"), std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "draft")};
}

Pair bundledPair() { return {bundledModel("target"), std::make_shared<ModelDrafter>(bundledModel("drafter"), "drafter")}; }

TEST(BatchedForward, EachSequenceGetsTheLogitsAndRowsOfItsOwnForward) {
  c10::InferenceMode guard;
  for (const std::string name : {"llama-tiny", "gpt2-tiny", "gemma2-tiny", "qwen3-tiny", "phi3-longrope-tiny"}) {
    SCOPED_TRACE(name);
    const auto model = fixtureModel(name);
    const auto prompts = randomPrompts(3, model->config().vocab_size, 2, 17, /*seed=*/41);
    std::vector<std::unique_ptr<KvCache>> alone_caches, batch_caches;
    std::vector<SequenceForward> batch;
    std::vector<at::Tensor> alone_logits;
    for (size_t i = 0; i < prompts.size(); ++i) {
      // Each sequence has a cache holding its first tokens; the batch feeds the rest at once.
      const int64_t held = static_cast<int64_t>(prompts[i].size()) / 2;
      const std::vector<int64_t> head(prompts[i].begin(), prompts[i].begin() + held);
      const std::vector<int64_t> tail(prompts[i].begin() + held, prompts[i].end());
      for (auto* caches : {&alone_caches, &batch_caches}) {
        caches->push_back(model->makeCache());
        if (held > 0) model->forward(idsTensor(head), 0, caches->back().get(), nullptr, 0);
      }
      alone_logits.push_back(model->forward(idsTensor(tail), held, alone_caches.back().get()));
      batch.push_back({idsTensor(tail), held, batch_caches.back().get(), nullptr, CausalLM::kAllRows, false});
    }
    const auto results = model->forwardBatch(batch);
    ASSERT_EQ(results.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_FALSE(results[i].error);
      // Dense products over more rows may sum in another order: equal within float noise.
      EXPECT_TRUE(torch::allclose(results[i].logits, alone_logits[i], 1e-5, 1e-5)) << "sequence " << i;
      for (int64_t l = 0; l < model->config().num_layers; ++l) {
        EXPECT_TRUE(torch::allclose(batch_caches[i]->keys(l), alone_caches[i]->keys(l), 1e-5, 1e-5));
        EXPECT_EQ(batch_caches[i]->length(l), alone_caches[i]->length(l));
      }
    }
  }
}

TEST(BatchedForward, ABadSequenceFailsAloneAndTheOthersRun) {
  c10::InferenceMode guard;
  const auto model = fixtureModel("llama-tiny");
  auto good = model->makeCache(), bad = model->makeCache();
  const std::vector<SequenceForward> batch{
      {idsTensor({1, 2, 3}), 0, good.get(), nullptr, 1, false},
      {idsTensor({1, 99999}), 0, bad.get(), nullptr, 1, false},  // outside the vocabulary
  };
  const auto results = model->forwardBatch(batch);
  ASSERT_FALSE(results[0].error);
  EXPECT_EQ(results[0].logits.size(0), 1);
  EXPECT_EQ(good->length(), 3);
  ASSERT_TRUE(results[1].error);
  EXPECT_EQ(bad->length(), 0);
  try {
    std::rethrow_exception(results[1].error);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
}

// Greedy rows of a batch are the rows decoded alone, for every batch size and both pairs.
void expectBatchEqualsAlone(const Pair& pair, int count, int64_t gamma, uint64_t seed) {
  const SessionOptions options = greedyOptions(gamma, 14);
  const auto prompts = randomPrompts(count, pair.target->config().vocab_size, 1, 30, seed);
  BatchSession batch(pair.target, pair.drafter, prompts, options, {});
  batch.runToEnd();
  ASSERT_TRUE(batch.finished());
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(batch.sequence(static_cast<size_t>(i)).generated(), decodeAlone(pair.target, pair.drafter, prompts[static_cast<size_t>(i)], options))
        << "batch of " << count << ", sequence " << i << " (prompt of " << prompts[static_cast<size_t>(i)].size() << " ids)";
  }
  // Joined: fewer forwards than sequences forwarded (every phase ran every row at once).
  if (count > 1) EXPECT_LT(batch.batchedForwards(), batch.sequencesForwarded());
}

TEST(BatchSession, GreedyRowsEqualEachRowDecodedAloneOnTheFixturePair) {
  for (int count : {1, 2, 3, 8}) expectBatchEqualsAlone(fixturePair(), count, 4, 1000 + static_cast<uint64_t>(count));
}

TEST(BatchSession, GreedyRowsEqualEachRowDecodedAloneOnTheBundledPair) {
  for (int count : {1, 2, 3, 8}) expectBatchEqualsAlone(bundledPair(), count, 3, 2000 + static_cast<uint64_t>(count));
}

TEST(BatchSession, RowsAcceptDifferentNumbersOfDraftsInOneRound) {
  const Pair pair = bundledPair();
  const auto prompts = randomPrompts(8, pair.target->config().vocab_size, 4, 20, /*seed=*/77);
  BatchSession batch(pair.target, pair.drafter, prompts, greedyOptions(4, 16), {});
  batch.runToEnd();
  bool differed = false;
  for (size_t round = 1; round < batch.sequence(0).rounds().size() && !differed; ++round) {
    std::set<int64_t> accepted;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& rounds = batch.sequence(i).rounds();
      if (round < rounds.size()) accepted.insert(rounds[round].accepted);
    }
    differed = accepted.size() > 1;
  }
  EXPECT_TRUE(differed) << "every round accepted the same number of drafts in all 8 rows";
}

TEST(BatchSession, OneVerifyForwardServesEveryRow) {
  const Pair pair = fixturePair();
  const auto prompts = randomPrompts(5, pair.target->config().vocab_size, 3, 12, /*seed=*/5);
  BatchSession batch(pair.target, pair.drafter, prompts, greedyOptions(2, 8), {});
  batch.stepPhase();  // prefill: the target's prefill of 5 rows, then the drafter's
  EXPECT_EQ(batch.batchedForwards(), 2);
  EXPECT_EQ(batch.sequencesForwarded(), 10);
  batch.stepPhase();  // draft: 2 drafter steps of 5 rows
  EXPECT_EQ(batch.nextPhase(), Phase::Verify);
  const int64_t before = batch.batchedForwards();
  batch.stepPhase();  // verify
  EXPECT_EQ(batch.batchedForwards(), before + 1);
  EXPECT_EQ(batch.sequencesForwarded(), 10 + 10 + 5);
}

TEST(BatchSession, SampledRowsUseTheirOwnSeeds) {
  const Pair pair = fixturePair();
  SessionOptions options = greedyOptions(3, 10);
  options.sampling.greedy = false;
  options.sampling.temperature = 1.0;
  options.seed = 9;
  const std::vector<std::vector<int64_t>> prompts(3, std::vector<int64_t>{5, 6, 7, 8});
  BatchSession batch(pair.target, pair.drafter, prompts, options, {});
  batch.runToEnd();
  // Row i is the run alone with seed + i.
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionOptions row = options;
    row.seed = options.seed + i;
    EXPECT_EQ(batch.sequence(i).generated(), decodeAlone(pair.target, pair.drafter, prompts[i], row)) << i;
  }
  EXPECT_NE(batch.sequence(0).generated(), batch.sequence(1).generated());
}

TEST(BatchSession, RefusesAnEmptyBatchAndNamesABadSequence) {
  const Pair pair = fixturePair();
  EXPECT_THROW(BatchSession(pair.target, pair.drafter, {}, greedyOptions(2, 4), {}), Error);
  try {
    BatchSession(pair.target, pair.drafter, {{1, 2}, {1, 1 << 20}}, greedyOptions(2, 4), {});
    ADD_FAILURE() << "a prompt outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1"), std::string::npos) << e.what();
  }
}

// The batch faults' root causes, against what the batch's own books say
// happened: the first round in which some sequence accepted fewer drafts than
// the batch's best (uniform-advance), or in which the last sequence rejected a
// draft (length-not-rolled-back); the sequence named is the lowest one harmed
// in that round, the operation the target's prune of that round.
struct BatchFaultCase {
  Fault fault;
  uint64_t seed;
};

struct ExpectedBreach {
  int64_t round = -1;
  int64_t sequence = -1;
};

// Reads the rounds each sequence recorded (run without the fault: the rounds
// up to the first breach are the same with it, as nothing differs before).
ExpectedBreach firstHarmedRow(const BatchSession& batch, Fault fault) {
  const size_t last = batch.size() - 1;
  for (size_t round = 1;; ++round) {
    bool any = false;
    int64_t most = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& rounds = batch.sequence(i).rounds();
      if (round < rounds.size()) most = std::max(most, rounds[round].accepted), any = true;
    }
    if (!any) return {};
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& rounds = batch.sequence(i).rounds();
      if (round >= rounds.size()) continue;
      const RoundRecord& r = rounds[round];
      const bool rejected = r.accepted < static_cast<int64_t>(r.drafts.size());
      const bool harmed = fault == Fault::UniformAdvance ? (r.accepted < most && rejected) : (i == last && rejected);
      if (harmed) return {static_cast<int64_t>(round), static_cast<int64_t>(i)};
    }
  }
}

class BatchFaults : public ::testing::TestWithParam<BatchFaultCase> {};

TEST_P(BatchFaults, RootCauseNamesTheSequenceRoundAndOperationTheBooksSay) {
  const Pair pair = bundledPair();
  const auto prompts = randomPrompts(4, pair.target->config().vocab_size, 3, 24, GetParam().seed);
  SessionOptions options = greedyOptions(4, 20);
  options.record_attention = false;
  BatchSession clean(pair.target, pair.drafter, prompts, options, {});
  clean.runToEnd();
  const ExpectedBreach expected = firstHarmedRow(clean, GetParam().fault);
  ASSERT_GE(expected.round, 1) << "the batch gave the fault nothing to act on; pick another seed";

  options.fault = GetParam().fault;
  BatchSession faulty(pair.target, pair.drafter, prompts, options, {});
  const BatchDiffReport report = diffBatchLockstep(faulty);
  EXPECT_TRUE(report.failed());
  const RootCause* cause = report.rootCause();
  ASSERT_NE(cause, nullptr) << report.explanation();
  EXPECT_EQ(cause->sequence, expected.sequence) << report.explanation();
  EXPECT_EQ(cause->round, expected.round) << report.explanation();
  EXPECT_EQ(cause->phase, Phase::Prune);
  EXPECT_EQ(cause->cache, CacheRole::Target);
  EXPECT_EQ(cause->operation, CacheEventKind::Crop);
  EXPECT_NE(cause->fault_action, "");
  // Sequences the fault never harmed keep the contract.
  for (size_t i = 0; i < report.sequences.size(); ++i) {
    if (GetParam().fault == Fault::LengthNotRolledBack && i + 1 < report.sequences.size()) {
      EXPECT_FALSE(report.sequences[i].root_cause) << "sequence " << i << ": " << report.sequences[i].explanation();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, BatchFaults,
                         ::testing::Values(BatchFaultCase{Fault::UniformAdvance, 11}, BatchFaultCase{Fault::UniformAdvance, 12},
                                           BatchFaultCase{Fault::LengthNotRolledBack, 11},
                                           BatchFaultCase{Fault::LengthNotRolledBack, 13}),
                         [](const auto& info) {
                           std::string name = std::string(faultInfo(info.param.fault).name) + "_" + std::to_string(info.param.seed);
                           for (char& ch : name) ch = isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(BatchFaults, ASingleSequenceRefusesABatchFault) {
  const Pair pair = fixturePair();
  SessionOptions options = greedyOptions(2, 4);
  options.fault = Fault::UniformAdvance;
  try {
    Session(pair.target, pair.drafter, {1, 2, 3}, options, {});
    ADD_FAILURE() << "a batch fault on one sequence was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two or more prompts"), std::string::npos) << e.what();
  }
}

TEST(BatchFaults, CleanBatchKeepsTheContractInEverySequence) {
  const Pair pair = bundledPair();
  BatchSession batch(pair.target, pair.drafter, randomPrompts(3, pair.target->config().vocab_size, 2, 16, 3),
                     greedyOptions(4, 16), {});
  const BatchDiffReport report = diffBatchLockstep(batch);
  EXPECT_FALSE(report.failed()) << report.explanation();
  EXPECT_EQ(report.rootCause(), nullptr);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

using namespace testing_support;

// The controller the GUI and the CLI drive holds a batch as it holds one
// session: steps it, shows one sequence at a time with every sequence's
// acceptance, and diffs it, showing the sequence that broke first.
class BatchController : public ::testing::Test {
 protected:
  void SetUp() override {
    controller.adoptModels(fixtureModel("llama-tiny"), fixtureTokenizer("llama-tiny"), {},
                           std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "draft"), "llama-tiny");
  }
  SessionSpec spec(Fault fault = Fault::None) const {
    SessionSpec s;
    s.prompt = "Once upon a time";
    s.more_prompts = {"The", "A long time ago in a galaxy far, far away there"};
    s.options.gamma = 3;
    s.options.max_new_tokens = 16;
    s.options.ignore_eos = true;
    s.options.fault = fault;
    return s;
  }
  SessionController controller;
};

TEST_F(BatchController, ShowsOneSequenceWithEverySequencesAcceptance) {
  controller.startSession(spec());
  EXPECT_EQ(controller.batchSize(), 3);
  controller.runToEnd();
  ASSERT_TRUE(controller.finished());
  auto first = controller.snapshot();
  ASSERT_EQ(first->batch_accepted.size(), 3u);
  EXPECT_EQ(first->shown_sequence, 0);
  for (size_t b = 0; b < 3; ++b) {
    const auto& accepted = first->batch_accepted[b];
    EXPECT_EQ(accepted.size(), first->rounds.size()) << b;
    EXPECT_TRUE(std::any_of(accepted.begin(), accepted.end(), [](int64_t n) { return n >= 0; })) << b;
  }
  controller.showSequence(2);
  auto third = controller.snapshot();
  EXPECT_EQ(third->shown_sequence, 2);
  EXPECT_EQ(third->sequence, controller.liveSession()->sequence());
  EXPECT_NE(third->sequence, first->sequence);
  EXPECT_THROW(controller.showSequence(3), Error);

  // Saved and opened again: every sequence, shown one at a time, the one
  // shown when saved first.
  const std::string path = batchTracePath("controller");
  controller.saveTrace(path, "");
  SessionController reader;
  const auto opened = reader.openTrace(path, nullptr);
  EXPECT_EQ(reader.batchSize(), 3);
  EXPECT_EQ(opened->shown_sequence, 2);
  EXPECT_EQ(opened->sequence, third->sequence);
  EXPECT_EQ(opened->batch_accepted, third->batch_accepted);
  reader.showSequence(0);
  EXPECT_EQ(reader.snapshot()->sequence, first->sequence);
  EXPECT_EQ(reader.snapshot()->shown_sequence, 0);
  EXPECT_THROW(reader.showSequence(3), Error);
  std::filesystem::remove(path);
}

TEST_F(BatchController, DiffShowsTheSequenceThatBrokeFirst) {
  SessionSpec s = spec(Fault::LengthNotRolledBack);
  const DiffReport& report = controller.runDiff(s, std::atomic<bool>(false));
  ASSERT_TRUE(report.root_cause) << report.explanation();
  EXPECT_EQ(report.root_cause->sequence, 2);
  EXPECT_EQ(controller.shownSequence(), 2);
  EXPECT_EQ(controller.snapshot()->shown_sequence, 2);
  ASSERT_TRUE(controller.rootCause());
  EXPECT_EQ(controller.rootCause()->sequence, 2);
  controller.showSequence(0);  // a sequence the fault spared: its own clean report
  ASSERT_TRUE(controller.snapshot()->diff);
  EXPECT_FALSE(controller.snapshot()->diff->root_cause);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

using namespace testing_support;

// The paged layout (docs/paged-cache.md) under a batch: one pool per model
// that every sequence allocates from; every verify's logits are bit for bit
// the contiguous layout's, and greedy rows still equal each row alone.
std::vector<at::Tensor> verifyLogits(const Session& s) {
  std::vector<at::Tensor> out;
  for (const auto& [round, verify] : s.verifyRecords()) out.push_back(verify.logits);
  return out;
}

TEST(PagedBatch, LogitsAreBitIdenticalToTheContiguousLayout) {
  const Pair pair = bundledPair();
  for (int count : {1, 3}) {
    for (int64_t block : {int64_t{1}, int64_t{5}, int64_t{16}}) {
      SCOPED_TRACE("batch " + std::to_string(count) + ", block " + std::to_string(block));
      const auto prompts = randomPrompts(count, pair.target->config().vocab_size, 2, 30, 900 + static_cast<uint64_t>(count));
      SessionOptions options = greedyOptions(4, 20);
      BatchSession contiguous(pair.target, pair.drafter, prompts, options, {});
      contiguous.runToEnd();
      options.cache_layout = StorageLayout{true, block};
      BatchSession paged(pair.target, pair.drafter, prompts, options, {});
      paged.runToEnd();
      for (size_t i = 0; i < paged.size(); ++i) {
        ASSERT_TRUE(paged.sequence(i).targetCache()->paged());
        EXPECT_EQ(paged.sequence(i).generated(), contiguous.sequence(i).generated()) << i;
        const auto a = verifyLogits(paged.sequence(i)), b = verifyLogits(contiguous.sequence(i));
        ASSERT_EQ(a.size(), b.size());
        for (size_t r = 0; r < a.size(); ++r) EXPECT_TRUE(torch::equal(a[r], b[r])) << "sequence " << i << " verify " << r;
      }
      if (count > 1) {  // one pool for the batch: sequences' tables map blocks of the same pool
        EXPECT_EQ(paged.sequence(0).targetCache()->blockTable()->pool(), paged.sequence(1).targetCache()->blockTable()->pool());
      }
    }
  }
}

TEST(PagedBatch, GreedyRowsEqualEachRowDecodedAlone) {
  const Pair pair = fixturePair();
  SessionOptions options = greedyOptions(3, 14);
  options.cache_layout = StorageLayout{true, 4};
  for (int count : {2, 8}) {
    const auto prompts = randomPrompts(count, pair.target->config().vocab_size, 1, 30, 3000 + static_cast<uint64_t>(count));
    BatchSession batch(pair.target, pair.drafter, prompts, options, {});
    batch.runToEnd();
    SessionOptions alone = options;
    alone.cache_layout = StorageLayout{};
    for (int i = 0; i < count; ++i) {
      EXPECT_EQ(batch.sequence(static_cast<size_t>(i)).generated(),
                decodeAlone(pair.target, pair.drafter, prompts[static_cast<size_t>(i)], alone))
          << "batch of " << count << ", sequence " << i;
    }
  }
}

TEST(PagedBatch, WhatThePagedLayoutCannotHoldIsRefusedUpFront) {
  SessionOptions options = greedyOptions(2, 4);
  options.cache_layout = StorageLayout{true, 16};
  options.eviction = parseSessionEviction("h2o:0.5");
  EXPECT_THROW(options.validate(), Error);
  options.eviction.reset();
  options.use_cache = false;
  EXPECT_THROW(options.validate(), Error);
  options.use_cache = true;
  try {
    Session(fixtureModel("mistral-sw-tiny"), nullptr, {1, 2, 3}, options, {});
    ADD_FAILURE() << "a sliding-window model was accepted in the paged layout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window"), std::string::npos) << e.what();
  }
}

// freed-block-reused: a paged rollback frees blocks its table keeps mapping.
// The expected breach comes from the clean batch's own books: the first
// round whose target rollback cut a sequence's rows below a block boundary
// (freed a whole block), the lowest such sequence.
ExpectedBreach firstRollbackFreeingABlock(const BatchSession& batch, int64_t block) {
  ExpectedBreach first;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (const CacheEvent& e : batch.sequence(i).record().events.events()) {
      if (e.cache != CacheRole::Target || e.phase != Phase::Prune || e.rows_before.empty()) continue;
      const auto blocks = [&](int64_t rows) { return (rows + block - 1) / block; };
      if (blocks(e.rows_after.front()) >= blocks(e.rows_before.front())) continue;
      if (first.round < 0 || e.round < first.round) first = {e.round, static_cast<int64_t>(i)};
      break;  // this sequence's first; a lower sequence wins ties (visited first)
    }
  }
  return first;
}

TEST(PagedBatch, FreedBlockReusedIsNamedAtTheRollbackThatFreedAMappedBlock) {
  const Pair pair = bundledPair();
  const int64_t block = 2;
  for (uint64_t seed : {uint64_t{21}, uint64_t{22}}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto prompts = randomPrompts(3, pair.target->config().vocab_size, 3, 20, seed);
    SessionOptions options = greedyOptions(4, 20);
    options.record_attention = false;
    options.cache_layout = StorageLayout{true, block};
    BatchSession clean(pair.target, pair.drafter, prompts, options, {});
    clean.runToEnd();
    const ExpectedBreach expected = firstRollbackFreeingABlock(clean, block);
    ASSERT_GE(expected.round, 1) << "no rollback freed a block; pick another seed";

    options.fault = Fault::FreedBlockReused;
    BatchSession faulty(pair.target, pair.drafter, prompts, options, {});
    const BatchDiffReport report = diffBatchLockstep(faulty);
    const RootCause* cause = report.rootCause();
    ASSERT_NE(cause, nullptr) << report.explanation();
    EXPECT_EQ(cause->kind, "block") << cause->what;
    EXPECT_EQ(cause->sequence, expected.sequence) << cause->what;
    EXPECT_EQ(cause->round, expected.round) << cause->what;
    EXPECT_EQ(cause->phase, Phase::Prune);
    EXPECT_EQ(cause->cache, CacheRole::Target);
    EXPECT_EQ(cause->operation, CacheEventKind::Crop);
    ASSERT_FALSE(cause->dangling_blocks.empty());
    for (const DanglingBlock& d : cause->dangling_blocks) {
      EXPECT_GE(d.first_row, cause->actual_rows) << "a freed block lies past the rows the rollback kept";
    }
    EXPECT_NE(cause->what.find("sequence " + std::to_string(expected.sequence) + "'s block table"), std::string::npos)
        << cause->what;
    // The symptom: the pool handed a block freed while mapped to a sequence
    // again, and some sequence's logits then left the uncached reference.
    const BlockPool& pool = *faulty.sequence(0).targetCache()->blockTable()->pool();
    std::set<int64_t> freed_mapped;
    bool reused = false;
    for (const BlockLogEntry& e : pool.log()) {
      if (e.operation == BlockOperation::Free && e.still_mapped) freed_mapped.insert(e.block);
      if (e.operation == BlockOperation::Reuse && freed_mapped.count(e.block) > 0) reused = true;
    }
    EXPECT_TRUE(reused) << "no block freed while mapped was handed out again";
    EXPECT_TRUE(report.failed()) << report.explanation();
    // The overwrites themselves are in the books: some sequence's rows were
    // found written over by another sequence, and every sequence that
    // diverged has a root cause of its own.
    bool overwritten = false;
    for (size_t i = 0; i < faulty.size(); ++i) {
      for (const CacheEvent& e : faulty.sequence(i).record().events.events()) {
        if (e.overwritten_rows.empty()) continue;
        overwritten = true;
        EXPECT_NE(e.overwritten_by, static_cast<int64_t>(i)) << "sequence " << i << " overwrote itself";
      }
      if (report.sequences[i].diverged()) EXPECT_TRUE(report.sequences[i].root_cause) << report.sequences[i].explanation();
    }
    EXPECT_TRUE(overwritten) << "no sequence's rows were found overwritten";
  }
}

TEST(PagedBatch, FreedBlockReusedNeedsThePagedLayout) {
  const Pair pair = fixturePair();
  SessionOptions options = greedyOptions(2, 4);
  options.fault = Fault::FreedBlockReused;
  try {
    Session(pair.target, pair.drafter, {1, 2, 3}, options, {});
    ADD_FAILURE() << "the paged fault was accepted on a contiguous cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-layout paged"), std::string::npos) << e.what();
  }
  options.cache_layout = StorageLayout{true, 2};
  EXPECT_NO_THROW(Session(pair.target, pair.drafter, {1, 2, 3}, options, {}));
}

// A batch's trace (format version 4): every sequence's record comes back as
// it was, and the walker names the same root cause in each from the file
// alone; the blocks a paged cache's table mapped without owning them too.
TEST(BatchTrace, EverySequenceRoundTripsWithItsRootCause) {
  const Pair pair = bundledPair();
  SessionOptions options = greedyOptions(4, 20);
  options.cache_layout = StorageLayout{true, 2};
  options.fault = Fault::FreedBlockReused;
  BatchSession batch(pair.target, pair.drafter, randomPrompts(3, pair.target->config().vocab_size, 3, 20, 21), options, {});
  batch.runToEnd();
  const TraceData original = captureTrace(batch, nullptr, {{"note", "batch"}});
  ASSERT_EQ(original.sequences(), 3);
  EXPECT_EQ(original.info["batch"], 3);
  const std::string path = batchTracePath("roundtrip");
  writeTrace(path, original);
  const TraceData back = readTrace(path);
  ASSERT_EQ(back.sequences(), 3);
  bool any_dangling = false;
  for (int64_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    const SessionRecord& a = batch.sequence(static_cast<size_t>(i)).record();
    const SessionRecord& b = back.sequence(i);
    EXPECT_EQ(a.sequence, b.sequence);
    EXPECT_EQ(a.prompt_length, b.prompt_length);
    EXPECT_EQ(a.ledger.entries().size(), b.ledger.entries().size());
    ASSERT_EQ(a.events.events().size(), b.events.events().size());
    for (size_t e = 0; e < a.events.events().size(); ++e) {
      EXPECT_EQ(toJson(a.events.events()[e]), toJson(b.events.events()[e])) << "event " << e;
      any_dangling = any_dangling || !b.events.events()[e].dangling_blocks.empty();
    }
    ASSERT_EQ(a.verify.size(), b.verify.size());
    for (const auto& [round, verify] : a.verify) {
      ASSERT_TRUE(verify.logits.defined());
      EXPECT_TRUE(torch::equal(verify.logits, b.verify.at(round).logits)) << "round " << round;
    }
    RootCauseOptions by_sequence;
    by_sequence.sequence = i;
    const auto live = findRootCause(a, by_sequence), replayed = findRootCause(b, by_sequence);
    ASSERT_EQ(live.has_value(), replayed.has_value());
    if (live) {
      EXPECT_EQ(replayed->event_index, live->event_index);
      EXPECT_EQ(replayed->kind, "block");
      EXPECT_EQ(replayed->sequence, i);
      EXPECT_EQ(replayed->what, live->what);
    }
  }
  EXPECT_TRUE(any_dangling);
  const auto file = SafetensorsFile::open(path);
  EXPECT_NE(file->find("sequence.1.ledger.target.k"), nullptr);
  EXPECT_NE(file->find("sequence.2.round.1.logits"), nullptr);
  // Written again from what was read: the same bytes.
  const std::string again = batchTracePath("again");
  writeTrace(again, back);
  const auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(again), bytes(path));

  // A batch file missing one of a later sequence's tensors: refused, naming
  // the sequence and the tensor.
  std::string broken = bytes(path);
  const size_t at = broken.find("sequence.1.ledger.target.k");
  ASSERT_NE(at, std::string::npos);
  broken[at + std::string("sequence.1.ledger.target.").size()] = 'j';
  {
    std::ofstream out(again, std::ios::binary | std::ios::trunc);
    out << broken;
  }
  try {
    readTrace(again);
    ADD_FAILURE() << "a batch trace missing a tensor was read";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("sequence 1 of the batch"), std::string::npos) << message;
    EXPECT_NE(message.find("sequence.1.ledger.target.k"), std::string::npos) << message;
  }
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(BatchTrace, MoreSequencesThanABatchHoldsAreRefused) {
  TraceData trace;
  trace.more_sequences.resize(static_cast<size_t>(kMaxTraceSequences));
  try {
    writeTrace(batchTracePath("too_many"), trace);
    ADD_FAILURE() << "a trace of " << trace.sequences() << " sequences was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 64 sequences"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

using namespace testing_support;

// The padded layout (docs/batching.md, "The padded layout"): prompts
// left-padded to the longest, every joined forward as wide as its widest
// sequence, pads masked out of every attention and the pads after a
// sequence's inputs dropped right after the forward. Greedy rows still equal
// each row decoded alone; the books say which rows are padding.
SessionOptions paddedOptions(int64_t gamma, int64_t max_new) {
  SessionOptions options = greedyOptions(gamma, max_new);
  options.batch_layout = BatchLayout::Padded;
  return options;
}

// The pad rows a left-padded prefill gives a sequence: the longest prefix
// (prompt minus its last token, which round 1 feeds) less its own. A prompt
// of one token has no prefill and takes no prefill pads.
int64_t prefillPads(const std::vector<std::vector<int64_t>>& prompts, size_t i) {
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()) - 1);
  const int64_t own = static_cast<int64_t>(prompts[i].size()) - 1;
  return own > 0 ? longest - own : 0;
}

int64_t countEvents(const Session& s, CacheEventKind kind) {
  const auto& events = s.events().events();
  return std::count_if(events.begin(), events.end(), [&](const CacheEvent& e) { return e.kind == kind; });
}

void expectPaddedBatchEqualsAlone(const Pair& pair, int count, int64_t gamma, uint64_t seed) {
  const SessionOptions options = paddedOptions(gamma, 14);
  const auto prompts = randomPrompts(count, pair.target->config().vocab_size, 1, 30, seed);
  BatchSession batch(pair.target, pair.drafter, prompts, options, {});
  batch.runToEnd();
  ASSERT_TRUE(batch.finished());
  int64_t dropped = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    SCOPED_TRACE("batch of " + std::to_string(count) + ", sequence " + std::to_string(i) + " (prompt of " +
                 std::to_string(prompts[i].size()) + " ids)");
    const Session& s = batch.sequence(i);
    EXPECT_EQ(s.generated(), decodeAlone(pair.target, pair.drafter, prompts[i], greedyOptions(gamma, 14)));
    // The cache begins with its prompt's left padding, and the books say so.
    const int64_t pads = prefillPads(prompts, i);
    EXPECT_EQ(s.targetCache()->padRows(), pads);
    EXPECT_EQ(s.drafterCache()->padRows(), pads);
    const CacheLayout layout = s.events().layoutAfterEvents(CacheRole::Target, s.targetCache()->numLayers(),
                                                             s.events().events().size());
    for (int64_t r = 0; r < static_cast<int64_t>(layout.layers.front().size()); ++r) {
      const LedgerEntry& e = s.ledger().entry(layout.layers.front()[static_cast<size_t>(r)]);
      EXPECT_EQ(e.padding, r < pads) << "row " << r;
      if (e.padding) EXPECT_EQ(e.position, -1) << "row " << r;
    }
    // Every row but the pads is the token of its position; the pads are no fault.
    const CacheAudit audit = auditAt(s.record(), CacheRole::Target, Moment{s.rounds().back().index, Phase::Prune},
                                     pair.target.get());
    EXPECT_TRUE(audit.clean()) << (audit.firstBad() ? rowStateName(audit.firstBad()->state) : "");
    EXPECT_EQ(audit.padding_rows, pads * s.targetCache()->numLayers());
    dropped += countEvents(s, CacheEventKind::DropPadding);
    // A dropped pad row dies as padding, never as a token of the text.
    for (const LedgerEntry& e : s.ledger().entries()) {
      if (e.reason == DeathReason::Padding) EXPECT_TRUE(e.padding);
    }
  }
  // Eight rows accept different numbers of drafts, so some later call is wider than some sequence's inputs.
  if (count == 8) EXPECT_GT(dropped, 0) << "no forward of 8 sequences needed pads after its inputs";
}

TEST(PaddedBatch, GreedyRowsEqualEachRowDecodedAloneOnTheFixturePair) {
  for (int count : {1, 2, 3, 8}) expectPaddedBatchEqualsAlone(fixturePair(), count, 4, 1000 + static_cast<uint64_t>(count));
}

TEST(PaddedBatch, GreedyRowsEqualEachRowDecodedAloneOnTheBundledPair) {
  for (int count : {1, 2, 3, 8}) expectPaddedBatchEqualsAlone(bundledPair(), count, 3, 2000 + static_cast<uint64_t>(count));
}

// A pad row has no position: no later write "rivals" it, although every
// forward that pads after a shorter sequence's inputs writes pad rows too
// (the books give them all position -1).
TEST(PaddedBatch, APadRowsHistoryNamesNoRivalForItsPosition) {
  const Pair pair = fixturePair();
  const auto prompts = randomPrompts(8, pair.target->config().vocab_size, 1, 30, 1008);
  BatchSession batch(pair.target, pair.drafter, prompts, paddedOptions(4, 14), {});
  batch.runToEnd();
  int64_t later_pad_writes = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Session& s = batch.sequence(i);
    const std::vector<LedgerEntry>& entries = s.ledger().entries();
    const auto& events = s.events().events();
    for (const CacheEvent& event : events) {
      if (event.round == 0) continue;  // the prefill's left padding
      for (int64_t w : event.written) later_pad_writes += entries[static_cast<size_t>(w)].padding ? 1 : 0;
    }
    for (size_t entry = 0; entry < entries.size(); ++entry) {
      if (!entries[entry].padding || entries[entry].cache != CacheRole::Target) continue;
      for (const RowHistoryItem& item : rowHistory(entries, s.events(), static_cast<int64_t>(entry), 0)) {
        EXPECT_NE(item.effect, RowEffect::Rivalled) << "sequence " << i << ", pad entry " << entry << ": " << item.what;
      }
    }
  }
  ASSERT_GT(later_pad_writes, 0) << "no forward after the prefill wrote pad rows: nothing could rival a pad row";
}

TEST(PaddedBatch, EveryJoinedForwardIsAsWideAsItsWidestSequence) {
  const Pair pair = fixturePair();
  const std::vector<std::vector<int64_t>> prompts{{5, 6, 7, 8, 9, 10, 11}, {5, 6}, {7, 8, 9}};
  BatchSession batch(pair.target, pair.drafter, prompts, paddedOptions(2, 8), {});
  batch.stepPhase();  // prefill: 6, 1 and 2 tokens fed, left-padded to 6
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& events = batch.sequence(i).events().events();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front().written.size(), 6u) << "sequence " << i;
    EXPECT_EQ(static_cast<int64_t>(events.front().hidden_padding.size()), prefillPads(prompts, i)) << i;
  }
}

TEST(PaddedBatch, SampledRowsUseTheirOwnSeeds) {
  const Pair pair = fixturePair();
  SessionOptions options = paddedOptions(3, 10);
  options.sampling.greedy = false;
  options.sampling.temperature = 1.0;
  options.seed = 9;
  const std::vector<std::vector<int64_t>> prompts{{5, 6, 7, 8, 9, 10}, {5, 6}, {7, 8, 9, 10}};
  BatchSession batch(pair.target, pair.drafter, prompts, options, {});
  batch.runToEnd();
  // Row i is the run alone (ragged, unpadded) with seed + i.
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionOptions row = options;
    row.batch_layout = BatchLayout::Ragged;
    row.seed = options.seed + i;
    EXPECT_EQ(batch.sequence(i).generated(), decodeAlone(pair.target, pair.drafter, prompts[i], row)) << i;
    EXPECT_EQ(batch.sequence(i).targetCache()->padRows(), prefillPads(prompts, i)) << i;
  }
}

TEST(PaddedBatch, CleanPaddedBatchKeepsTheContractInEverySequence) {
  const Pair pair = bundledPair();
  BatchSession batch(pair.target, pair.drafter, randomPrompts(3, pair.target->config().vocab_size, 2, 16, 3),
                     paddedOptions(4, 16), {});
  const BatchDiffReport report = diffBatchLockstep(batch);
  EXPECT_FALSE(report.failed()) << report.explanation();
  EXPECT_EQ(report.rootCause(), nullptr);
}

TEST(PaddedBatch, RefusesWhatCannotHoldWithASentence) {
  const Pair pair = fixturePair();
  const auto expectRefused = [&](SessionOptions options, const std::string& words) {
    try {
      BatchSession(pair.target, pair.drafter, {{1, 2, 3}, {4, 5}}, options, {});
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  SessionOptions paged = paddedOptions(2, 4);
  paged.cache_layout = StorageLayout{true, 4};
  expectRefused(paged, "paged engines do not pad");
  SessionOptions reversed = paddedOptions(2, 4);
  reversed.fault = Fault::AppendReversed;
  expectRefused(reversed, "ragged layout");
  SessionOptions ragged = greedyOptions(2, 4);
  ragged.fault = Fault::PaddingMaskDropped;
  expectRefused(ragged, "--batch-layout padded");
  SessionOptions alone = paddedOptions(2, 4);
  alone.fault = Fault::PaddingMaskDropped;
  EXPECT_THROW(Session(pair.target, pair.drafter, {1, 2, 3}, alone, {}), Error);
}

// padding-mask-dropped: the root cause is the first forward after the prefill
// that attended a pad row, in the lowest sequence that has pads. Both come
// from the clean padded batch's own books: which sequences' caches hold pad
// rows, and which of their caches' operations came first after the prefill.
struct PadBreach {
  int64_t sequence = -1;
  Moment moment;
  CacheRole cache = CacheRole::Target;
};

PadBreach firstForwardAfterThePrefill(const BatchSession& clean) {
  for (size_t i = 0; i < clean.size(); ++i) {
    const Session& s = clean.sequence(i);
    if (s.targetCache()->padRows() == 0) continue;
    for (const CacheEvent& e : s.events().events()) {
      if (e.round >= 1 && (e.kind == CacheEventKind::Append || e.kind == CacheEventKind::Refeed)) {
        return {static_cast<int64_t>(i), e.moment(), e.cache};
      }
    }
  }
  return {};
}

TEST(PaddedBatch, PaddingMaskDroppedIsFoundAtTheFirstForwardAfterThePrefill) {
  for (const Pair& pair : {fixturePair(), bundledPair()}) {
    for (uint64_t seed : {21u, 22u}) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      const auto prompts = randomPrompts(4, pair.target->config().vocab_size, 2, 24, seed);
      SessionOptions options = paddedOptions(4, 16);
      BatchSession clean(pair.target, pair.drafter, prompts, options, {});
      clean.runToEnd();
      const PadBreach expected = firstForwardAfterThePrefill(clean);
      ASSERT_GE(expected.sequence, 0) << "no sequence was padded; pick another seed";

      options.fault = Fault::PaddingMaskDropped;
      BatchSession faulty(pair.target, pair.drafter, prompts, options, {});
      const BatchDiffReport report = diffBatchLockstep(faulty);
      const RootCause* cause = report.rootCause();
      ASSERT_NE(cause, nullptr) << report.explanation();
      EXPECT_EQ(cause->kind, "padding") << report.explanation();
      EXPECT_EQ(cause->sequence, expected.sequence) << report.explanation();
      EXPECT_EQ(cause->round, expected.moment.round) << report.explanation();
      EXPECT_EQ(cause->phase, expected.moment.phase) << report.explanation();
      EXPECT_EQ(cause->cache, expected.cache) << report.explanation();
      EXPECT_EQ(cause->operation, CacheEventKind::Append);
      EXPECT_EQ(static_cast<int64_t>(cause->rows.size()), clean.sequence(static_cast<size_t>(expected.sequence)).targetCache()->padRows());
      EXPECT_NE(cause->fault_action.find("padding mask"), std::string::npos) << cause->fault_action;
      // The longest prompt has no pads: the fault never harms it.
      for (size_t i = 0; i < report.sequences.size(); ++i) {
        if (clean.sequence(i).targetCache()->padRows() == 0) {
          EXPECT_FALSE(report.sequences[i].root_cause) << "sequence " << i << ": " << report.sequences[i].explanation();
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvscope
