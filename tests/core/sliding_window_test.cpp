// Sliding windows: the cache of a sliding-window layer keeps only
// the rows its next query can see (window - 1), evicting the rest with that
// reason in the ledger and the operation log; outputs stay those of the
// reference; and `window-roll-early` (Gemma 2's HybridCache bug) is caught by
// the diff from position W - 1 on, with a root cause naming the step.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/audit/cache_audit.h"
#include "core/audit/cache_diff.h"
#include "core/audit/root_cause.h"
#include "core/cache/fault.h"
#include "core/decode/autoregressive.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/causal_lm.h"
#include "core/trace/trace_file.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

// Fixture models, loaded once per test process.
std::shared_ptr<const CausalLM> model(const std::string& name) { return testing_support::fixtureModel(name); }

nlohmann::json fixture(const std::string& kind, const std::string& name) {
  std::ifstream in(fs::path(KVSCOPE_FIXTURES) / kind / (name + ".json"));
  return nlohmann::json::parse(in);
}

SessionOptions greedyOptions(int64_t gamma, Fault fault = Fault::None) {
  SessionOptions o;
  o.gamma = gamma;
  o.max_new_tokens = 32;
  o.ignore_eos = true;
  o.fault = fault;
  return o;
}

std::vector<int64_t> promptOf(const std::string& name, size_t which = 1) {
  return fixture("greedy", name)["cases"][which]["ids"].get<std::vector<int64_t>>();
}

// --- KvCache -------------------------------------------------------------------

TEST(KvCacheWindow, EvictFrontKeepsTheNewestRowsInOrder) {
  KvCache cache(2, 1, 2, torch::kFloat32, 2);
  auto rows = torch::arange(10, torch::kFloat32).reshape({1, 5, 2});  // rows 0..4 hold 2r, 2r + 1
  cache.append(0, rows, rows + 100);
  cache.append(1, rows, rows + 100);
  EXPECT_EQ(cache.evictBefore(0, 3), 3);
  EXPECT_EQ(cache.length(0), 2);
  EXPECT_EQ(cache.firstPosition(0), 3);
  EXPECT_EQ(cache.endPosition(0), 5);
  EXPECT_TRUE(torch::equal(cache.keys(0), rows.narrow(1, 3, 2)));
  EXPECT_TRUE(torch::equal(cache.values(0), rows.narrow(1, 3, 2) + 100));
  EXPECT_EQ(cache.evictBefore(0, 2), 0);  // already gone: nothing more
  EXPECT_EQ(cache.length(1), 5);          // the other layer keeps everything
  EXPECT_EQ(cache.firstPosition(1), 0);
  // Appending continues after the kept rows; clear starts again at position 0.
  cache.append(0, rows.narrow(1, 0, 1), rows.narrow(1, 0, 1));
  EXPECT_EQ(cache.endPosition(0), 6);
  EXPECT_THROW(cache.evictFront(0, 4), Error);
  cache.clear();
  EXPECT_EQ(cache.firstPosition(0), 0);
  EXPECT_EQ(cache.endPosition(0), 0);
}

// --- the cache keeps the window -------------------------------------------------

struct WindowModel {
  std::string name;
  std::string drafter;  // "" = plain decoding
};

class SlidingWindowCache : public ::testing::TestWithParam<WindowModel> {};

TEST_P(SlidingWindowCache, KeepsWindowMinusOneRowsAndMatchesTheReference) {
  const WindowModel& m = GetParam();
  const auto target = model(m.name);
  const ModelConfig& config = target->config();
  const auto golden = fixture("greedy", m.name)["cases"][1];
  std::shared_ptr<const Drafter> drafter;
  if (!m.drafter.empty()) drafter = std::make_shared<ModelDrafter>(model(m.drafter));
  Session session(target, drafter, golden["ids"].get<std::vector<int64_t>>(), greedyOptions(drafter ? 4 : 0), {});
  while (!session.finished()) {
    session.stepRound();
    const int64_t believed = static_cast<int64_t>(session.believedCacheTokens(CacheRole::Target).size());
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      const int64_t window = config.windowOf(layer);
      const int64_t rows = session.targetCache()->length(layer);
      if (window > 0) {
        EXPECT_EQ(rows, std::min(believed, window - 1)) << "layer " << layer << ", round " << session.currentRound();
      } else {
        EXPECT_EQ(rows, believed) << "global layer " << layer;
      }
    }
  }
  // The output is the reference's (cache on, windows evicted).
  EXPECT_EQ(session.generated(), golden["generated"].get<std::vector<int64_t>>());
  // Rows that left the window were logged as evictions of the windowed layers only.
  int64_t evictions = 0;
  for (const CacheEvent& e : session.events().events()) {
    if (e.kind != CacheEventKind::Evict || e.cache != CacheRole::Target) continue;
    ++evictions;
    EXPECT_EQ(e.reason, DeathReason::Eviction);
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      EXPECT_EQ(e.touches(layer), config.windowOf(layer) > 0) << "layer " << layer;
    }
  }
  EXPECT_GT(evictions, 0);
  // Entries no layer holds any more die by eviction; Gemma 2's global layers keep theirs alive.
  const bool all_layers_slide = std::all_of(config.sliding_layers.begin(), config.sliding_layers.end(),
                                            [](bool sliding) { return sliding; });
  int64_t evicted_deaths = 0;
  for (const LedgerEntry& e : session.ledger().entries()) {
    if (e.cache == CacheRole::Target && e.reason == DeathReason::Eviction) ++evicted_deaths;
  }
  EXPECT_EQ(evicted_deaths > 0, all_layers_slide);
  // And every recorded moment audits clean against a recomputation.
  for (const RoundRecord& r : session.rounds()) {
    for (Phase phase : {Phase::Prefill, Phase::Verify, Phase::Prune}) {
      if ((r.index == 0) != (phase == Phase::Prefill)) continue;
      const CacheAudit audit = auditAt(session.record(), CacheRole::Target, {r.index, phase}, target.get());
      EXPECT_TRUE(audit.clean()) << "round " << r.index << " " << phaseName(phase) << ": "
                                 << rowStateName(audit.rows.front().state) << " at layer " << audit.rows.front().layer
                                 << " row " << audit.rows.front().row;
      EXPECT_LT(audit.max_value_error, 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SlidingWindowCache,
                         ::testing::Values(WindowModel{"mistral-sw-tiny", ""}, WindowModel{"gemma2-tiny", ""},
                                           WindowModel{"mistral-sw-tiny", "mistral-sw-tiny"},
                                           WindowModel{"gemma2-tiny", "mistral-sw-tiny"}),
                         [](const auto& info) {
                           std::string name = info.param.name + (info.param.drafter.empty() ? "_plain" : "_speculative");
                           for (char& ch : name) ch = isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(SlidingWindowGenerate, PlainGenerationEvictsAndMatchesTheReference) {
  for (const std::string name : {"mistral-sw-tiny", "gemma2-tiny"}) {
    const auto golden = fixture("greedy", name)["cases"][1];
    GenerateOptions o;
    o.max_new_tokens = 32;
    o.ignore_eos = true;
    const GenerateResult result = generateAutoregressive(*model(name), golden["ids"].get<std::vector<int64_t>>(), o, {});
    EXPECT_EQ(result.ids, golden["generated"].get<std::vector<int64_t>>()) << name;
  }
}

// --- window-roll-early ------------------------------------------------------------

TEST(WindowRollEarly, RefusedWithoutASlidingWindow) {
  try {
    Session session(model("llama-tiny"), nullptr, {1, 2, 3}, greedyOptions(0, Fault::WindowRollEarly), {});
    FAIL() << "a fault on sliding-window layers must be refused for a model without them";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding"), std::string::npos) << e.what();
  }
}

// Token by token from one prompt token, as the fixture measured the stock
// HybridCache: the first wrong position is the fixture's.
TEST(WindowRollEarly, DivergesFromPositionWindowMinusOneLikeTheStockHybridCache) {
  const auto target = model("gemma2-tiny");
  const int64_t window = target->config().sliding_window;
  int64_t stock_first_wrong = -1;
  const nlohmann::json logits = fixture("logits", "gemma2-tiny");
  for (const auto& c : logits["cases"]) {
    if (c["name"] == "len33") stock_first_wrong = c["stock_hybridcache_first_wrong_position"].get<int64_t>();
  }
  ASSERT_EQ(stock_first_wrong, window - 1) << "the fixture's stock cache goes wrong at W - 1";

  Session session(target, nullptr, {promptOf("gemma2-tiny").front()}, greedyOptions(0, Fault::WindowRollEarly), {});
  const DiffReport report = diffLockstep(session);
  ASSERT_TRUE(report.failed());
  int64_t first_wrong = -1;
  for (const PositionDiff& d : report.positions) {
    if (d.max_abs_logit_diff > 1e-3) {
      first_wrong = d.position;
      break;
    }
  }
  EXPECT_EQ(first_wrong, stock_first_wrong);
  ASSERT_TRUE(report.root_cause.has_value());
  const RootCause& cause = *report.root_cause;
  // The step: the prune of the round that decoded position W - 2, whose
  // eviction left W - 2 rows where the next query needs W - 1.
  EXPECT_EQ(cause.cache, CacheRole::Target);
  EXPECT_EQ(cause.operation, CacheEventKind::Evict);
  EXPECT_EQ(cause.phase, Phase::Prune);
  EXPECT_EQ(cause.round, window - 1);
  EXPECT_EQ(cause.expected_rows, window - 1);
  EXPECT_EQ(cause.actual_rows, window - 2);
  EXPECT_EQ(cause.layers, (std::vector<int64_t>{0, 2}));  // Gemma 2's sliding layers
  ASSERT_FALSE(cause.verdicts.empty());
  EXPECT_EQ(cause.verdicts.front().state, RowState::Missing);
  EXPECT_EQ(cause.verdicts.front().position, 0);
  EXPECT_NE(cause.what.find("left 6 rows where 7 were required"), std::string::npos) << cause.what;
  EXPECT_NE(cause.what.find("rolled one step early"), std::string::npos) << cause.what;
}

// --- traces keep the window ------------------------------------------------------

TEST(SlidingWindowTrace, RoundTripKeepsEvictionsAndTheirContract) {
  auto session = std::make_unique<Session>(model("gemma2-tiny"), nullptr, promptOf("gemma2-tiny"),
                                           greedyOptions(0), std::vector<int64_t>{});
  session->runToEnd();
  const fs::path path = fs::temp_directory_path() / "kvscope_sliding_window_trace.kvtrace";
  TraceData data;
  data.record = session->record();
  writeTrace(path.string(), data);
  const TraceData loaded = readTrace(path.string());
  fs::remove(path);
  const auto& before = session->events().events();
  const auto& after = loaded.record.events.events();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].layers, after[i].layers) << i;
    EXPECT_EQ(before[i].expected_first, after[i].expected_first) << i;
  }
  const Moment end{session->rounds().back().index, Phase::Prune};
  const CacheAudit live = auditAt(session->record(), CacheRole::Target, end, nullptr);
  const CacheAudit replayed = auditAt(loaded.record, CacheRole::Target, end, nullptr);
  EXPECT_TRUE(replayed.clean());
  EXPECT_EQ(live.rows_per_layer, replayed.rows_per_layer);
  EXPECT_EQ(replayed.expected_first.size(), 4u);
  EXPECT_GT(replayed.expected_first[0], 0);
  EXPECT_EQ(replayed.expected_first[1], 0);
}

}  // namespace
}  // namespace kvscope
