// Verify Attention on a mask from a file: a checkerboard of 400 x 400
// (consistent shapes, so the validator accepts it) must not become one plot
// item per mask edge; a causal mask is still outlined.
#include <QtTest>

#include <qcustomplot.h>

#include "ui/context/DebuggerContext.h"
#include "ui/windows/AttentionPanel.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

// One verify round whose attention has `n` queries over `n` keys and the
// given mask (1 = visible), on a snapshot with nothing else recorded.
SnapshotPtr snapshotWithMask(int n, const std::function<bool(int, int)>& visible) {
  auto snapshot = std::make_shared<SessionSnapshot>();
  snapshot->replay_only = true;
  snapshot->finished = true;
  snapshot->target = {true, 1, 1, 1, 4};
  RoundRecord prefill;
  RoundRecord round;
  round.index = 1;
  snapshot->rounds = {prefill, round};
  snapshot->current_round = 2;
  snapshot->next_phase = Phase::Draft;
  auto attention = std::make_shared<AttentionData>();
  attention->round = 1;
  attention->heads = 1;
  attention->queries = n;
  attention->keys = {n};
  attention->layers.emplace_back(static_cast<size_t>(n) * n, 1.0f / static_cast<float>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n) * n);
  for (int q = 0; q < n; ++q) {
    for (int k = 0; k < n; ++k) mask[static_cast<size_t>(q) * n + k] = visible(q, k) ? 1 : 0;
  }
  attention->masks.push_back(std::move(mask));
  snapshot->attention[1] = attention;
  return snapshot;
}

int itemsAfterShowing(const SnapshotPtr& snapshot) {
  DebuggerContext context;
  AttentionPanel panel(context);
  context.setSnapshot(snapshot, SnapshotReason::Trace);
  Cursor cursor = context.cursor();
  cursor.round = 1;
  cursor.phase = Phase::Verify;
  context.setCursor(cursor);
  panel.flushRefresh();
  return panel.plot()->itemCount();
}

}  // namespace

class HostileMaskViewTest : public QObject {
  Q_OBJECT
 private slots:
  void checkerboardMaskIsNotOutlinedEdgeByEdge() {
    const int n = 400;
    const int items = itemsAfterShowing(snapshotWithMask(n, [](int q, int k) { return (q + k) % 2 == 0; }));
    // 2 * 399 * 400 edges before; now the outline is left out (the grey cells show the mask).
    QVERIFY2(items < 4 * (n + n) + 64, qPrintable(QString::number(items)));
  }

  void causalMaskIsStillOutlined() {
    const int n = 40;
    const int items = itemsAfterShowing(snapshotWithMask(n, [](int q, int k) { return k <= q; }));
    const int blank = itemsAfterShowing(snapshotWithMask(n, [](int, int) { return true; }));
    // A staircase: one run per boundary step, each side.
    QVERIFY2(items - blank >= n - 1, qPrintable(QStringLiteral("%1 vs %2").arg(items).arg(blank)));
  }
};

QTEST_MAIN(HostileMaskViewTest)
#include "hostile_mask_view_test.moc"
