// In the views: a session whose target cache an eviction policy
// compressed. The KV heatmap marks, for the shown layer and kv head, exactly
// the rows the policy masked (grey, cross-hatched; the hover names policy and
// round), heads differ, a trace round trip shows the same marks, and the row
// history of a masked entry lists the Evict event with its heads and scores.
// torch before Qt: Qt's keyword macros (slots, emit) clash with libtorch headers.
#include <torch/types.h>

#include <QtTest>
#include <unistd.h>

#include <filesystem>

#include <qcustomplot.h>

#include "core/cache/eviction_masks.h"
#include "core/control/trace_capture.h"
#include "core/decode/session.h"
#include "core/model/causal_lm.h"
#include "core/snapshot/snapshot_builder.h"
#include "core/trace/trace_file.h"
#include "ui/context/DebuggerContext.h"
#include "ui/context/RowHistory.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/AttentionPanel.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

std::shared_ptr<const CausalLM> model(const char* name) {
  return loadCausalLM(std::string(KVSCOPE_FIXTURES) + "/models/" + name, torch::TensorOptions().dtype(torch::kFloat32));
}

std::unique_ptr<Session> evictedSession() {
  SessionOptions o;
  o.gamma = 3;
  o.max_new_tokens = 8;
  o.ignore_eos = true;
  o.eviction = parseSessionEviction("h2o:0.3:every=2");
  auto drafter = std::make_shared<ModelDrafter>(model("llama-tiny-draft"), "llama-tiny-draft");
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 24; ++i) prompt.push_back(3 + (i * 37) % 200);
  auto session = std::make_unique<Session>(model("llama-tiny"), drafter, prompt, o, std::vector<int64_t>{2});
  session->runToEnd();
  return session;
}

// Rect items drawn with the "evicted" cross-hatching.
int hatchedItems(QCustomPlot* plot) {
  int count = 0;
  for (int i = 0; i < plot->itemCount(); ++i) {
    auto* rect = qobject_cast<QCPItemRect*>(plot->item(i));
    if (rect && rect->brush().style() == Qt::DiagCrossPattern) ++count;
  }
  return count;
}

// Rows of (layer, kv head) the log says are masked at the end.
int expectedMasked(const SessionSnapshot& s, int64_t layer, int64_t head) {
  const Moment end = s.lastMoment();
  const EvictionMasks masks = masksAt(s.events, CacheRole::Target, end);
  int count = 0;
  for (int64_t entry : physicalRows(s, CacheRole::Target, layer, end)) count += masks.masked(entry, layer, head) ? 1 : 0;
  return count;
}

Cursor endCursor(const SessionSnapshot& s, int64_t layer, int64_t head) {
  Cursor c;
  c.round = s.lastRound();
  c.phase = s.lastPhase();
  c.layer = layer;
  c.head = head;
  return c;
}

}  // namespace

class EvictionViewTest : public QObject {
  Q_OBJECT
 private slots:
  void heatmapMarksTheRowsThePolicyMasked() {
    const auto session = evictedSession();
    SnapshotBuilder builder;
    const std::shared_ptr<const SessionSnapshot> snapshot = builder.build(*session);
    KvHeatmapView view(CacheRole::Target);
    view.resize(600, 500);
    bool heads_differ = false;
    for (int64_t layer = 0; layer < snapshot->target.layers; ++layer) {
      std::vector<int> per_head;
      for (int64_t head = 0; head < snapshot->target.kv_heads; ++head) {
        view.show(snapshot, endCursor(*snapshot, layer, head), false, ColorRange{});
        const int expected = expectedMasked(*snapshot, layer, head);
        QVERIFY(expected > 0);
        QCOMPARE(view.countMasked(), expected);
        const auto held = std::count_if(view.matrix().rows.begin(), view.matrix().rows.end(),
                                        [](const ViewRow& row) { return row.physical_row >= 0; });
        QCOMPARE(view.countMasked(), static_cast<int>(held - session->targetCache()->keptRows(layer, head)));
        QVERIFY(hatchedItems(view.plot()) > 0);
        for (const ViewRow& row : view.matrix().rows) {
          if (row.masked_by < 0) continue;
          const CacheEvent& e = snapshot->events.events()[static_cast<size_t>(row.masked_by)];
          QVERIFY(e.masksRows());
          QCOMPARE(QString::fromStdString(e.policy), QStringLiteral("h2o"));
        }
        per_head.push_back(view.countMasked());
        // KVSCOPE_UI_SHOTS=dir saves the view (for reviewing the marks by eye).
        if (const QByteArray dir = qgetenv("KVSCOPE_UI_SHOTS"); !dir.isEmpty() && layer == 0) {
          view.QWidget::show();
          QVERIFY(QTest::qWaitForWindowExposed(&view));
          view.plot()->replot();  // a queued replot would grab the previous head's pixels
          QVERIFY(view.grab().save(QString::fromUtf8(dir) + "/evicted-head" + QString::number(head) + ".png"));
        }
      }
      // Heads keep different rows: compare which, not only how many.
      view.show(snapshot, endCursor(*snapshot, layer, 0), false, ColorRange{});
      const CacheMatrix head0 = view.matrix();
      view.show(snapshot, endCursor(*snapshot, layer, 1), false, ColorRange{});
      for (size_t r = 0; r < head0.rows.size(); ++r) {
        heads_differ = heads_differ || (head0.rows[r].masked_by >= 0) != (view.matrix().rows[r].masked_by >= 0);
      }
    }
    QVERIFY(heads_differ);
    // The prefill's moment already shows the prefill's eviction.
    Cursor prefill = endCursor(*snapshot, 0, 0);
    prefill.round = 0;
    prefill.phase = Phase::Prefill;
    view.show(snapshot, prefill, false, ColorRange{});
    QVERIFY(view.countMasked() > 0);
  }

  void verifyAttentionMarksTheKeysThePolicyMasked() {
    // A masked key's column is white (weight 0) in Verify Attention; alone
    // that reads as "no attention". The panel hatches it as the KV view does.
    const auto session = evictedSession();
    SnapshotBuilder builder;
    const SnapshotPtr snapshot = builder.build(*session);
    DebuggerContext context;
    AttentionPanel panel(context);
    context.setSnapshot(snapshot, SnapshotReason::Trace);
    int64_t marked = 0;
    for (int64_t round = 1; round <= snapshot->lastRound(); ++round) {
      if (snapshot->attention.count(round) == 0) continue;
      const EvictionMasks masks = masksAt(snapshot->events, CacheRole::Target, {round, Phase::Verify});
      for (int64_t head = 0; head < snapshot->target.kv_heads; ++head) {
        Cursor cursor = context.cursor();
        cursor.round = round;
        cursor.phase = Phase::Verify;
        cursor.layer = 1;
        cursor.head = head;
        context.setCursor(cursor);
        panel.flushRefresh();
        int expected = 0, shown = 0;
        for (const AttentionKey& key : panel.keys()) {
          expected += key.entry >= 0 && masks.masked(key.entry, 1, head) ? 1 : 0;
          shown += key.masked_by >= 0 ? 1 : 0;
        }
        QCOMPARE(shown, expected);
        QCOMPARE(hatchedItems(panel.plot()), shown);  // one cross-hatched column per masked key
        marked += shown;
      }
    }
    QVERIFY(marked > 0);
  }

  void aTraceShowsTheSameMarks() {
    const auto session = evictedSession();
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kvscope_eviction_view_" + std::to_string(::getpid()) + ".kvtrace")).string();
    writeTrace(path, captureTrace(*session, nullptr));
    const TraceData trace = readTrace(path);
    std::filesystem::remove(path);
    SnapshotBuilder live_builder, trace_builder;
    const std::shared_ptr<const SessionSnapshot> live = live_builder.build(*session);
    const std::shared_ptr<const SessionSnapshot> replay = trace_builder.build(trace);
    KvHeatmapView a(CacheRole::Target), b(CacheRole::Target);
    for (int64_t head = 0; head < live->target.kv_heads; ++head) {
      a.show(live, endCursor(*live, 1, head), true, ColorRange{});
      b.show(replay, endCursor(*replay, 1, head), true, ColorRange{});
      QCOMPARE(b.rowCount(), a.rowCount());
      for (int r = 0; r < a.rowCount(); ++r) {
        QCOMPARE(b.matrix().rows[static_cast<size_t>(r)].masked_by, a.matrix().rows[static_cast<size_t>(r)].masked_by);
      }
    }
  }

  void rowHistoryListsTheEvictEvent() {
    const auto session = evictedSession();
    SnapshotBuilder builder;
    const auto snapshot = builder.build(*session);
    const CacheEvent* first = nullptr;
    for (const CacheEvent& e : snapshot->events.events()) {
      if (e.masksRows()) {
        first = &e;
        break;
      }
    }
    QVERIFY(first != nullptr);
    const MaskedRow& m = first->masked.front();
    const RowHistory history = rowHistory(*snapshot, m.entry, m.layer);
    int masked = 0;
    for (const RowHistoryItem& e : history.events) {
      if (e.effect != RowEffect::Masked) continue;
      if (++masked == 1) QCOMPARE(e.moment.round, first->round);
      QCOMPARE(QString::fromStdString(e.policy), QStringLiteral("h2o"));
      if (masked == 1) QVERIFY(std::find(e.kv_heads.begin(), e.kv_heads.end(), m.kv_head) != e.kv_heads.end());
      QVERIFY(e.row_after >= 0);
      QVERIFY2(QString::fromStdString(e.event_text).contains(QStringLiteral("policy h2o masked it")),
               e.event_text.c_str());
    }
    QVERIFY(masked >= 1);  // later re-compressions may mask it in other heads
  }
};

QTEST_MAIN(EvictionViewTest)
#include "eviction_view_test.moc"
