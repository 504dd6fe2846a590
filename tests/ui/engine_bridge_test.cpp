// The bridge between the GUI and the engine thread (ui/engine/EngineController):
// one mechanism, invoke(), for every request. A job runs on the engine thread
// with the core, its result comes back on the GUI thread, it is bracketed by
// busyChanged, and its error goes to failed() or to the handler it names. A
// new action is one invoke() call: the tests below add two that exist nowhere
// else in the code.
#include <QSignalSpy>
#include <QThread>
#include <QtTest>
#include <stdexcept>

#include "ui/engine/EngineController.h"

using namespace kvscope;
using namespace kvscope::ui;

class EngineBridgeTest : public QObject {
  Q_OBJECT

 private slots:
  void aJobRunsOnTheEngineThreadAndDeliversOnTheGuiThread() {
    EngineController controller;
    QSignalSpy busy(&controller, &EngineController::busyChanged);
    QThread* gui = QThread::currentThread();
    QThread* ran_on = nullptr;
    QThread* delivered_on = nullptr;
    bool had_session = true;
    bool delivered = false;
    controller.invoke(QStringLiteral("Asking the engine"), [&ran_on](EngineWorker& worker) {
      ran_on = QThread::currentThread();
      return worker.engine().hasSession();
    }, [&](bool has_session) {
      delivered_on = QThread::currentThread();
      had_session = has_session;
      delivered = true;
    });
    QTRY_VERIFY_WITH_TIMEOUT(delivered, 10000);
    QVERIFY(ran_on != nullptr);
    QVERIFY(ran_on != gui);
    QCOMPARE(delivered_on, gui);
    QVERIFY(!had_session);  // no models loaded, no session
    QTRY_COMPARE_WITH_TIMEOUT(busy.count(), 2, 10000);
    QCOMPARE(busy.at(0).at(0).toBool(), true);
    QCOMPARE(busy.at(0).at(1).toString(), QStringLiteral("Asking the engine"));
    QCOMPARE(busy.at(1).at(0).toBool(), false);
    QVERIFY(!controller.busy());
  }

  void anErrorIsReportedByTheJobsName() {
    EngineController controller;
    QSignalSpy failed(&controller, &EngineController::failed);
    QSignalSpy busy(&controller, &EngineController::busyChanged);
    bool delivered = false;
    controller.invoke(QStringLiteral("Failing on purpose"), [](EngineWorker&) -> int {
      throw std::runtime_error("the job could not run");
    }, [&](int) { delivered = true; });
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    QCOMPARE(failed.at(0).at(0).toString(), QStringLiteral("Failing on purpose"));
    QCOMPARE(failed.at(0).at(1).toString(), QStringLiteral("the job could not run"));
    QVERIFY(!delivered);
    QTRY_COMPARE_WITH_TIMEOUT(busy.count(), 2, 10000);  // busy is cleared after a failure too
  }

  void aJobMayKeepItsErrorsAndStayQuiet() {
    EngineController controller;
    QSignalSpy failed(&controller, &EngineController::failed);
    QSignalSpy busy(&controller, &EngineController::busyChanged);
    QString message;
    controller.invoke({QStringLiteral("Quiet"), [](EngineWorker&) { throw std::runtime_error("for the panel"); },
                       [&](const QString& m) { message = m; }, /*busy=*/false});
    QTRY_COMPARE_WITH_TIMEOUT(message, QStringLiteral("for the panel"), 10000);
    QCOMPARE(failed.count(), 0);
    QCOMPARE(busy.count(), 0);
  }

  // The actions the GUI already has go through the same mechanism: auditing
  // with no session fails by name and leaves the controller idle.
  void existingActionsUseTheSameMechanism() {
    EngineController controller;
    QSignalSpy failed(&controller, &EngineController::failed);
    QSignalSpy explain_failed(&controller, &EngineController::explainFailed);
    controller.stepRound();
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    QCOMPARE(failed.at(0).at(0).toString(), QStringLiteral("Step round"));
    controller.explain(ExplainRequest{}, false);
    QTRY_COMPARE_WITH_TIMEOUT(explain_failed.count(), 1, 10000);
    QVERIFY(explain_failed.at(0).at(0).toString().contains(QStringLiteral("no live session")));
    QCOMPARE(failed.count(), 1);  // explain's error went to its panel, not to a dialog
    QTRY_VERIFY_WITH_TIMEOUT(!controller.busy(), 10000);
  }

  // Jobs run one at a time, in the order they were asked for.
  void jobsRunInOrder() {
    EngineController controller;
    QStringList order;
    for (int i = 0; i < 5; ++i) {
      controller.invoke(QStringLiteral("Job"), [i](EngineWorker&) { return i; },
                        [&order](int n) { order << QString::number(n); });
    }
    QTRY_COMPARE_WITH_TIMEOUT(order.size(), 5, 10000);
    QCOMPARE(order.join(QLatin1Char(',')), QStringLiteral("0,1,2,3,4"));
  }
};

QTEST_MAIN(EngineBridgeTest)
#include "engine_bridge_test.moc"
