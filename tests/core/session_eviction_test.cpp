// An eviction policy inside a Session (core/decode/session_eviction.h).
// Every removal is an Evict event whose masked (entry, layer, kv head) rows are
// exactly what the cache's keep mask hides; budget 1.0 logs nothing and leaves
// greedy speculative output unchanged; a small budget with re-compression
// still runs to the end with exact cache lengths; the ledger kills only
// entries no head reads; row history lists the event; the masks survive a
// trace round trip, and a trace whose masked rows point nowhere is refused;
// the diff calls the drift an intended eviction, not a cache bug.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <unistd.h>

#include <functional>
#include <set>
#include <string>

#include "core/audit/cache_audit.h"
#include "core/audit/cache_diff.h"
#include "core/audit/row_history.h"
#include "core/cache/eviction_masks.h"
#include "core/control/trace_capture.h"
#include "core/error.h"
#include "core/trace/trace_file.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

SessionEviction evictSpec(const std::string& text) { return parseSessionEviction(text); }

std::unique_ptr<Session> evictingSession(const std::optional<SessionEviction>& eviction, int64_t max_new = 16,
                                         const std::string& target = "llama-tiny", bool record = false) {
  SessionOptions o = fastOptions(3, max_new, true, SamplingSettings{}, 0);
  o.ignore_eos = true;
  o.eviction = eviction;
  o.record_attention = record;
  o.record_logits = record;
  auto drafter = std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "llama-tiny-draft");
  return std::make_unique<Session>(fixtureModel(target), drafter,
                                   fixtureTokenizer("llama-tiny")->encode("Once upon a time there was a little fox"), o,
                                   std::vector<int64_t>{2});
}

std::vector<const CacheEvent*> policyEvictions(const Session& s) {
  std::vector<const CacheEvent*> out;
  for (const CacheEvent& e : s.events().events()) {
    if (e.masksRows()) out.push_back(&e);
  }
  return out;
}

// The cache's keep mask and the masks replayed from the log agree on every
// (layer, kv head, row) of the target cache now.
void expectMasksMatchCache(const Session& s, const CacheEventLog& log) {
  const KvCache& cache = *s.targetCache();
  const Moment now{s.currentRound(), Phase::Prune};  // after everything so far
  const CacheLayout layout = log.layoutAt(CacheRole::Target, cache.numLayers(), now);
  const EvictionMasks masks = masksAt(log, CacheRole::Target, now);
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    ASSERT_EQ(layout.rows(l), cache.length(l));
    const auto keep = cache.keepMask(l);  // [kv_heads, length] bool or undefined
    for (int64_t h = 0; h < cache.kvHeads(); ++h) {
      int64_t kept = 0;
      for (int64_t r = 0; r < cache.length(l); ++r) {
        const bool read = !keep.defined() || keep[h][r].item<bool>();
        const int64_t entry = layout.layers[static_cast<size_t>(l)][static_cast<size_t>(r)];
        EXPECT_EQ(read, !masks.masked(entry, l, h)) << "layer " << l << " head " << h << " row " << r;
        kept += read ? 1 : 0;
      }
      EXPECT_EQ(kept, cache.keptRows(l, h));
    }
  }
}

TEST(SessionEviction, ParsesTheCliForm) {
  const SessionEviction a = evictSpec("h2o:0.25:every=4");
  EXPECT_EQ(a.settings.policy, EvictionPolicy::H2O);
  EXPECT_DOUBLE_EQ(a.settings.budget.fraction, 0.25);
  EXPECT_EQ(a.settings.budget.rows, 0);
  EXPECT_EQ(a.recompress_every, 4);
  EXPECT_EQ(a.describe(), "h2o:0.25:every=4");
  const SessionEviction b = evictSpec("streaming:48:sinks=2");
  EXPECT_EQ(b.settings.budget.rows, 48);
  EXPECT_EQ(b.settings.sinks, 2);
  EXPECT_EQ(b.recompress_every, 0);
  EXPECT_EQ(evictSpec("knorm:1.0").describe(), "knorm:1.0");
  for (const std::string bad : {"h2o", "h2o:", "nope:0.5", "h2o:0", "h2o:1.5", "h2o:0.5:every=-1", "h2o:0.5:every",
                                "h2o:0.5:colour=3", "snapkv:0.5:kernel=4", "h2o:abc"}) {
    try {
      evictSpec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--evict"), std::string::npos) << e.what();
    }
  }
}

TEST(SessionEviction, RefusesWhatItCannotDo) {
  EXPECT_THROW(evictingSession(evictSpec("h2o:0.5"), 8, "mistral-sw-tiny"), Error);  // sliding-window layers
  SessionOptions o = fastOptions(3, 8, /*use_cache=*/false, SamplingSettings{}, 0);
  o.eviction = evictSpec("h2o:0.5");
  EXPECT_THROW(o.validate(), Error);
  o.use_cache = true;
  o.eviction->settings.demote_bits = 4;
  EXPECT_THROW(o.validate(), Error);
}

TEST(SessionEviction, FullBudgetChangesNothing) {
  auto plain = evictingSession(std::nullopt);
  plain->runToEnd();
  for (const std::string spec : {"h2o:1.0:every=1", "streaming:1.0", "snapkv:1.0:every=2", "knorm:1.0:every=1"}) {
    SCOPED_TRACE(spec);
    auto evicting = evictingSession(evictSpec(spec));
    evicting->runToEnd();
    EXPECT_EQ(evicting->generated(), plain->generated());
    EXPECT_TRUE(policyEvictions(*evicting).empty());
    EXPECT_EQ(evicting->events().events().size(), plain->events().events().size());
    EXPECT_FALSE(evicting->targetCache()->keepMask(0).defined());
  }
}

TEST(SessionEviction, SmallBudgetRunsToTheEndWithExactLengths) {
  for (const std::string spec : {"h2o:0.3:every=2", "snapkv:0.4:every=1:window=4", "streaming:6:sinks=2:every=3",
                                 "tova:0.5:every=1", "random:0.25:seed=3:every=2", "pyramid:0.5:every=2"}) {
    SCOPED_TRACE(spec);
    auto s = evictingSession(evictSpec(spec), 20);
    while (!s->finished()) {
      s->stepRound();
      const int64_t held = static_cast<int64_t>(s->sequence().size()) - 1;  // L' - 1 after every prune
      for (int64_t l = 0; l < s->targetCache()->numLayers(); ++l) EXPECT_EQ(s->targetCache()->length(l), held);
      // The drafter's cache is whole; it is one short after a round whose drafts were all accepted (docs/architecture.md).
      EXPECT_LE(s->drafterCache()->length(), held);
      EXPECT_GE(s->drafterCache()->length(), held - 1);
      EXPECT_FALSE(s->drafterCache()->keepMask(0).defined());
      expectMasksMatchCache(*s, s->events());
    }
    EXPECT_EQ(static_cast<int64_t>(s->generated().size()), 20);
    const auto evictions = policyEvictions(*s);
    ASSERT_FALSE(evictions.empty());
    EXPECT_EQ(evictions.front()->round, 0);
    EXPECT_EQ(evictions.front()->phase, Phase::Prefill);
    for (const CacheEvent* e : evictions) {
      EXPECT_EQ(e->rows_before, e->rows_after);  // masks move no row
      EXPECT_EQ(e->cache, CacheRole::Target);
      EXPECT_FALSE(e->masked.empty());
    }
    // Within budget after the last compression (the budget counts rows per kv head).
    const int64_t rows = s->targetCache()->length(0);
    const EvictionBudget& budget = s->options().eviction->settings.budget;
    if (s->options().eviction->settings.policy != EvictionPolicy::Pyramid && evictions.back()->round == s->currentRound() - 1) {
      for (int64_t h = 0; h < s->targetCache()->kvHeads(); ++h) EXPECT_LE(s->targetCache()->keptRows(0, h), budget.rowsOf(rows));
    }
  }
}

TEST(SessionEviction, LedgerKillsOnlyEntriesNoHeadReads) {
  auto s = evictingSession(evictSpec("h2o:0.3:every=2"), 16);
  s->runToEnd();
  const EvictionMasks masks = masksAt(s->events(), CacheRole::Target, {s->currentRound(), Phase::Prune});
  const int64_t pairs = s->target().config().num_layers * s->target().config().num_kv_heads;
  int64_t partial = 0, dead = 0;
  for (int64_t i = 0; i < s->ledger().size(); ++i) {
    const LedgerEntry& e = s->ledger().entry(i);
    if (e.cache != CacheRole::Target) continue;
    const int64_t masked = masks.maskedHeads(i);
    if (masked == pairs) {
      ++dead;
      EXPECT_EQ(e.reason, DeathReason::Eviction) << "entry " << i;
    } else if (masked > 0) {
      ++partial;
      EXPECT_EQ(e.reason, DeathReason::Alive) << "entry " << i;
    }
  }
  EXPECT_GT(dead, 0);
  EXPECT_GT(partial, 0);  // heads keep different rows
  // Every dead entry is listed as removed by the event that killed it.
  for (const CacheEvent* e : policyEvictions(*s)) {
    for (int64_t entry : e->removed) {
      EXPECT_EQ(s->ledger().entry(entry).reason, DeathReason::Eviction);
      EXPECT_EQ(s->ledger().entry(entry).died_round, e->round);
    }
  }
}

TEST(SessionEviction, RowHistoryListsTheEvictEvent) {
  auto s = evictingSession(evictSpec("h2o:0.3"), 8);
  s->runToEnd();
  const CacheEvent& event = *policyEvictions(*s).front();
  const MaskedRow& m = event.masked.front();
  const auto history = rowHistory(s->ledger().entries(), s->events(), m.entry, m.layer);
  int found = 0;
  for (const RowHistoryItem& item : history) {
    if (item.operation != CacheEventKind::Evict) continue;
    ++found;
    EXPECT_EQ(item.policy, "h2o");
    EXPECT_EQ(item.moment.round, 0);
    ASSERT_FALSE(item.kv_heads.empty());
    EXPECT_EQ(item.kv_heads.front(), m.kv_head);
    EXPECT_DOUBLE_EQ(item.scores.front(), m.score);
    EXPECT_NE(item.what.find("masked by policy h2o"), std::string::npos) << item.what;
    EXPECT_GE(item.row_after, 0);  // the row stays
  }
  EXPECT_EQ(found, 1);
}

class EvictionTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("kvscope_eviction_" + std::to_string(::getpid()) + ".kvtrace")).string();
    session_ = evictingSession(evictSpec("snapkv:0.4:every=2"), 12, "llama-tiny", /*record=*/true);
    session_->runToEnd();
    trace_ = captureTrace(*session_, nullptr);
  }
  void TearDown() override { fs::remove(path_); }

  void expectRefused(const std::function<void(CacheEvent&)>& mutate, const std::string& part) {
    TraceData bad = trace_;
    auto events = bad.record.events.events();
    for (CacheEvent& e : events) {
      if (e.masksRows()) {
        mutate(e);
        break;
      }
    }
    try {
      bad.record.events.restore(events);
      writeTrace(path_, bad);
      readTrace(path_);
      ADD_FAILURE() << "accepted a trace with " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }

  std::string path_;
  std::unique_ptr<Session> session_;
  TraceData trace_;
};

TEST_F(EvictionTrace, RoundTripGivesTheSameMasks) {
  writeTrace(path_, trace_);
  const TraceData back = readTrace(path_);
  ASSERT_EQ(back.record.events.events().size(), session_->events().events().size());
  for (size_t i = 0; i < back.record.events.events().size(); ++i) {
    const CacheEvent& a = session_->events().events()[i];
    const CacheEvent& b = back.record.events.events()[i];
    EXPECT_EQ(a.policy, b.policy);
    ASSERT_EQ(a.masked.size(), b.masked.size());
    for (size_t j = 0; j < a.masked.size(); ++j) {
      EXPECT_EQ(a.masked[j].entry, b.masked[j].entry);
      EXPECT_EQ(a.masked[j].layer, b.masked[j].layer);
      EXPECT_EQ(a.masked[j].kv_head, b.masked[j].kv_head);
      EXPECT_DOUBLE_EQ(a.masked[j].score, b.masked[j].score);
    }
  }
  expectMasksMatchCache(*session_, back.record.events);
  EXPECT_EQ(back.info["options"]["eviction"], "snapkv:0.4:every=2");
  for (int64_t i = 0; i < back.record.ledger.size(); ++i) {
    EXPECT_EQ(back.record.ledger.entry(i).reason, session_->ledger().entry(i).reason);
  }
}

TEST_F(EvictionTrace, MaskedRowsOutOfRangeAreRefused) {
  expectRefused([](CacheEvent& e) { e.masked.front().kv_head = 99; }, "kv head is 99");
  expectRefused([](CacheEvent& e) { e.masked.front().entry = 1000000; }, "ledger entry is 1000000");
  expectRefused([](CacheEvent& e) { e.masked.front().layer = 7; }, "out of range");
  expectRefused([](CacheEvent& e) { e.masked.front().kv_head = -1; }, "out of range");
  // An entry of the drafter's cache is not held by the target's layers.
  expectRefused(
      [&](CacheEvent& e) {
        for (int64_t i = 0; i < trace_.record.ledger.size(); ++i) {
          if (trace_.record.ledger.entry(i).cache == CacheRole::Drafter) {
            e.masked.front().entry = i;
            break;
          }
        }
      },
      "which that layer does not hold");
  expectRefused([](CacheEvent& e) { e.rows_after[0] -= 1; }, "replaying it gives");
}

TEST(SessionEviction, DiffCallsTheDriftAnIntendedEviction) {
  SessionOptions o = fastOptions(3, 12, true, SamplingSettings{}, 0);
  o.ignore_eos = true;
  o.record_logits = true;
  o.eviction = evictSpec("streaming:4:sinks=1");
  Session s(fixtureModel("llama-tiny"), std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "d"),
            fixtureTokenizer("llama-tiny")->encode("Once upon a time there was a little fox who lived"), o,
            std::vector<int64_t>{2});
  const DiffReport report = diffLockstep(s);
  EXPECT_FALSE(report.root_cause.has_value()) << report.root_cause->what;
  ASSERT_TRUE(report.diverged());  // four rows of a long prompt change the logits
  ASSERT_TRUE(report.eviction_cause.has_value());
  EXPECT_EQ(report.eviction_cause->policy, "streaming");
  EXPECT_EQ(report.eviction_cause->round, 0);
  EXPECT_FALSE(report.failed());
  EXPECT_NE(report.explanation().find("evicted by policy streaming at round 0"), std::string::npos)
      << report.explanation();
  // The audit at the end finds no bug: masked rows still hold their positions' K/V.
  const CacheAudit audit = auditAt(s.record(), CacheRole::Target, {s.currentRound(), Phase::Prune}, &s.target());
  EXPECT_TRUE(audit.clean());
  EXPECT_GT(audit.not_comparable_after_eviction, 0);
}

TEST(SessionEviction, AFaultIsStillTheRootCause) {
  SessionOptions o = fastOptions(3, 12, true, SamplingSettings{}, 0);
  o.ignore_eos = true;
  o.record_logits = true;
  o.eviction = evictSpec("h2o:0.5");
  o.fault = Fault::PruneShort;
  Session s(fixtureModel("llama-tiny"), std::make_shared<ModelDrafter>(fixtureModel("llama-tiny-draft"), "d"),
            fixtureTokenizer("llama-tiny")->encode("Once upon a time there was a little fox who lived"), o,
            std::vector<int64_t>{2});
  const DiffReport report = diffLockstep(s);
  ASSERT_TRUE(report.root_cause.has_value());
  EXPECT_EQ(report.root_cause->operation, CacheEventKind::Crop);
  EXPECT_TRUE(report.failed());
}

}  // namespace
}  // namespace kvscope
