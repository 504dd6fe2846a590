// The trace budget: a session keeps its verify passes' attention and logits
// within SessionOptions::trace_budget_mb, dropping the oldest rounds' attention
// first, then their logits; the newest round, the tokens and the ledger stay.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <memory>

#include "core/control/trace_capture.h"
#include "core/decode/drafter.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/snapshot/snapshot_builder.h"
#include "core/trace/record_budget.h"
#include "core/trace/trace_file.h"

namespace kvscope {
namespace {

// One round's record: attention of `layers` layers [2, 3, 100] float32
// (2,400 bytes each) and logits [3, 100] (1,200 bytes).
VerifyRecord fakeRecord(int64_t layers) {
  VerifyRecord r;
  for (int64_t l = 0; l < layers; ++l) r.attention.push_back(torch::rand({2, 3, 100}));
  r.logits = torch::rand({3, 100});
  return r;
}

TEST(RecordBudget, DropsTheOldestAttentionFirstThenLogitsAndNeverTheNewestRound) {
  std::map<int64_t, VerifyRecord> records;
  EXPECT_EQ(recordedBytes(fakeRecord(2)), 2 * 2400 + 1200);  // 6,000 bytes a round
  RecordBudget budget(13000);
  for (int64_t round = 1; round <= 4; ++round) {
    records[round] = fakeRecord(2);
    budget.admit(records, round);
    EXPECT_LE(budget.keptBytes(), 13000) << "round " << round;
  }
  // Round 3 (18,000) drops the attention of rounds 1 and 2 (-> 8,400), round 4
  // (14,400) that of round 3 (-> 9,600): every older round's attention goes
  // before any logits.
  for (int64_t round = 1; round <= 3; ++round) {
    EXPECT_TRUE(records[round].attention.empty() && records[round].attention_dropped) << round;
    EXPECT_TRUE(records[round].logits.defined() && !records[round].logits_dropped) << round;
  }
  EXPECT_EQ(records[4].attention.size(), 2u);
  EXPECT_EQ(budget.keptBytes(), 3 * 1200 + 6000);
  EXPECT_EQ(budget.roundsWithoutAttention(), 3);
  EXPECT_EQ(budget.roundsWithoutLogits(), 0);

  // A budget smaller than two rounds: the older rounds' logits go too.
  std::map<int64_t, VerifyRecord> tight;
  RecordBudget small(7000);
  for (int64_t round = 1; round <= 3; ++round) {
    tight[round] = fakeRecord(2);
    small.admit(tight, round);
  }
  EXPECT_TRUE(tight[1].logits_dropped && tight[2].logits_dropped);
  EXPECT_FALSE(tight[1].logits.defined());
  EXPECT_EQ(tight[3].attention.size(), 2u);
  EXPECT_TRUE(tight[3].logits.defined());
  EXPECT_EQ(small.keptBytes(), 6000);
  EXPECT_EQ(small.roundsWithoutLogits(), 2);
}

TEST(RecordBudget, ANewestRoundLargerThanTheBudgetStaysWhole) {
  std::map<int64_t, VerifyRecord> records;
  RecordBudget budget(1000);
  records[1] = fakeRecord(3);
  budget.admit(records, 1);
  EXPECT_EQ(records[1].attention.size(), 3u);  // the round being looked at is never cut
  records[2] = fakeRecord(3);
  budget.admit(records, 2);
  EXPECT_TRUE(records[1].attention_dropped && records[1].logits_dropped);
  EXPECT_EQ(records[2].attention.size(), 3u);
}

TEST(RecordBudget, NoLimitKeepsEverything) {
  std::map<int64_t, VerifyRecord> records;
  RecordBudget budget(0);
  for (int64_t round = 1; round <= 5; ++round) {
    records[round] = fakeRecord(2);
    budget.admit(records, round);
  }
  EXPECT_EQ(budget.roundsWithoutAttention(), 0);
  EXPECT_EQ(budget.keptBytes(), 5 * recordedBytes(fakeRecord(2)));
}

SessionOptions longOptions(int64_t budget_mb) {
  SessionOptions o;
  o.gamma = 4;
  o.max_new_tokens = 120;
  o.ignore_eos = true;
  o.sampling.greedy = true;
  o.trace_budget_mb = budget_mb;
  return o;
}

// The bundled pair records ~0.14 MB per round (6 layers x 8 heads x 5
// queries x ~100 keys of attention, 5 x 2,048 logits): 120 tokens make a few MB.
std::shared_ptr<const CausalLM> bundled(const std::string& role) {
  static std::map<std::string, std::shared_ptr<const CausalLM>> loaded;
  auto& model = loaded[role];
  if (!model) model = loadCausalLM(bundledModelDirectory(role), torch::TensorOptions().dtype(torch::kFloat32));
  return model;
}

std::unique_ptr<Session> newSession(int64_t budget_mb) {
  auto drafter = std::make_shared<ModelDrafter>(bundled("drafter"), "drafter");
  return std::make_unique<Session>(bundled("target"), drafter, std::vector<int64_t>{2046, 296, 258, 341, 826, 320},
                                   longOptions(budget_mb), std::vector<int64_t>{});
}

std::unique_ptr<Session> longSession(int64_t budget_mb) {
  auto session = newSession(budget_mb);
  session->runToEnd();
  return session;
}

TEST(RecordBudget, ASessionOverBudgetKeepsItsTokensLedgerAndNewestRound) {
  const auto full = longSession(0);
  const int64_t full_bytes = full->recordBudget().keptBytes();
  ASSERT_GT(full_bytes, 2 * 1024 * 1024) << "the session must record well over the 1 MB budget below";
  const auto limited = longSession(1);
  const RecordBudget& budget = limited->recordBudget();
  EXPECT_EQ(limited->generated(), full->generated());
  EXPECT_EQ(limited->ledger().size(), full->ledger().size());
  const int64_t newest = limited->rounds().back().index;
  const VerifyRecord& last = limited->verifyRecords().at(newest);
  EXPECT_FALSE(last.attention.empty());
  EXPECT_TRUE(last.logits.defined());
  EXPECT_GT(budget.roundsWithoutAttention(), 0);
  EXPECT_LE(budget.keptBytes(), budget.budgetBytes());
  EXPECT_TRUE(limited->verifyRecords().begin()->second.attention_dropped);
  int64_t recounted = 0;
  for (const auto& [round, record] : limited->verifyRecords()) recounted += recordedBytes(record);
  EXPECT_EQ(recounted, budget.keptBytes());
}

TEST(RecordBudget, DroppedRoundsSurviveATraceAndTheViewsSayWhy) {
  const auto limited = longSession(1);
  ASSERT_GT(limited->recordBudget().roundsWithoutAttention(), 0);
  const auto path = std::filesystem::temp_directory_path() / "kvscope_record_budget_test.kvtrace";
  writeTrace(path.string(), captureTrace(*limited, nullptr));
  const TraceData trace = readTrace(path.string());
  std::filesystem::remove(path);
  const VerifyRecord& first = trace.record.verify.begin()->second;
  EXPECT_TRUE(first.attention_dropped);
  EXPECT_TRUE(first.attention.empty());
  SnapshotBuilder builder;
  const auto snapshot = builder.build(trace);
  const auto& converted = snapshot->attention.at(trace.record.verify.begin()->first);
  EXPECT_TRUE(converted->attention_dropped);
  EXPECT_EQ(converted->layerCount(), 0);
  EXPECT_FALSE(snapshot->attention.rbegin()->second->attention_dropped);

  // A live session's views drop their copy too when the budget catches up.
  SnapshotBuilder live;
  auto session = newSession(1);
  session->stepRound();
  session->stepRound();
  ASSERT_GT(live.build(*session)->attention.at(1)->layerCount(), 0);
  session->runToEnd();
  ASSERT_TRUE(session->verifyRecords().at(1).attention_dropped);
  const auto later = live.build(*session);
  EXPECT_EQ(later->attention.at(1)->layerCount(), 0);
  EXPECT_TRUE(later->attention.at(1)->attention_dropped);
  EXPECT_FALSE(later->attention.at(1)->top_tokens.empty());  // the few numbers per query stay
}

TEST(RecordBudget, ANegativeBudgetIsRefusedByName) {
  SessionOptions o = longOptions(-1);
  try {
    o.validate();
    FAIL() << "accepted a negative budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace budget"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
