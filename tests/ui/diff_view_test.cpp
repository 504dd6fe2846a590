// The cache diff view: an injected fault is found (first divergence) and
// located (audit's first bad cell), and "Go to first bad cell" moves the
// cursor and the KV view there; without a fault nothing diverges.
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QTextBrowser>
#include <QtTest>

#include "ui/widgets/KvHeatmapView.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/SessionPanel.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class DiffViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("diff_view_test"); }

  void diffWithFaultFindsFirstDivergenceAndBadCell() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.sessionPanel()->setFault(QStringLiteral("no-prune"));
    window.diffPanel()->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->diff != nullptr && !window.controller().busy(), kTimeout);
    const DiffData& diff = *window.context().snapshot()->diff;
    QCOMPARE(diff.fault, std::string("no-prune"));
    QVERIFY(diff.diverged);
    QVERIFY(diff.audit != nullptr);
    const AuditData& audit = *diff.audit;
    QVERIFY(audit.has_bad_cell);
    window.diffPanel()->flushRefresh();
    QVERIFY(window.diffPanel()->pointCount() > 0);
    QVERIFY(window.diffPanel()->summary()->text().contains("first divergence"));
    QVERIFY(window.diffPanel()->goToBadCellButton()->isEnabled());
    window.diffPanel()->goToBadCellButton()->click();
    QCOMPARE(window.context().cursor().round, audit.round);
    QCOMPARE(window.context().cursor().position, audit.bad_position);
    KvHeatmapView* view = audit.cache == CacheRole::Target ? window.kvCachePanel()->targetView()
                                                           : window.kvCachePanel()->drafterView();
    QCOMPARE(int64_t{view->layer()}, audit.bad_layer);
    QCOMPARE(int64_t{view->head()}, audit.bad_head);
  }

  void auditNowLocatesAFaultInTheLiveCache() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.sessionPanel()->setFault(QStringLiteral("no-prune"));
    window.controller().startSession(window.sessionPanel()->sessionSpec());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->fault == "no-prune" && !window.controller().busy(), kTimeout);
    // Step until a round rejected a draft: its rows stay in the target cache.
    for (int i = 0; i < 20; ++i) {
      stepRound(window);
      const RoundRecord* round = window.context().snapshot()->round(window.context().latest().round);
      if (round->accepted < static_cast<int64_t>(round->drafts.size())) break;
    }
    window.diffPanel()->auditButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->audit != nullptr && !window.controller().busy(), kTimeout);
    const AuditData& audit = *window.context().snapshot()->audit;
    QVERIFY(audit.has_bad_cell);
    QCOMPARE(audit.round, window.context().latest().round);
    window.diffPanel()->flushRefresh();
    QVERIFY(window.diffPanel()->summary()->text().contains("first bad cell"));
    stepRound(window);  // a step makes the audit stale: it is dropped
    QVERIFY(window.context().snapshot()->audit == nullptr);
  }

  void diffWithoutFaultAgrees() {
    MainWindow window(fixtureOptions());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    window.diffPanel()->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->diff != nullptr && !window.controller().busy(), kTimeout);
    QVERIFY(!window.context().snapshot()->diff->diverged);
    QCOMPARE(window.context().snapshot()->diff->divergent, int64_t{0});
    window.diffPanel()->auditButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot()->audit != nullptr && !window.controller().busy(), kTimeout);
    QVERIFY(!window.context().snapshot()->audit->has_bad_cell);
  }
};

QTEST_MAIN(DiffViewTest)
#include "diff_view_test.moc"
