#pragma once
// Shared helpers of the GUI tests: the fixture model pair, waiting for the
// worker thread, flushing the panels' coalesced redraws, finding the error dialog.
#include <QApplication>
#include <QComboBox>
#include <QMap>
#include <QMessageBox>
#include <QPushButton>
#include <QSize>
#include <QTimer>
#include <QtTest>

#include "ui/windows/AttentionPanel.h"
#include "ui/windows/AttentionStepsPanel.h"
#include "ui/windows/CompressionPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"
#include "ui/windows/RowHistoryPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/SessionPanel.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui::testing {

constexpr int kTimeout = 120000;
// The frame-time guards (generous bounds against regressions, not the
// measured figures, which are in README) scale under ASan + UBSan.
#ifdef KVSCOPE_SANITIZE
constexpr double kTimeScale = 5.0;
#else
constexpr double kTimeScale = 1.0;
#endif

// The fixture pair: llama-tiny (target) and llama-tiny-draft (drafter), random weights.
inline MainWindowOptions fixtureOptions() {
  MainWindowOptions options;
  options.models.target_dir = KVSCOPE_FIXTURES "/models/llama-tiny";
  options.models.drafter_dir = KVSCOPE_FIXTURES "/models/llama-tiny-draft";
  options.restore_layout = false;
  return options;
}

// Runs every panel's pending (coalesced) refresh now.
inline void flush(MainWindow& window) {
  window.timelinePanel()->flushRefresh();
  window.tokenStripPanel()->flushRefresh();
  window.kvCachePanel()->flushRefresh();
  window.attentionPanel()->flushRefresh();
  window.attentionStepsPanel()->flushRefresh();
  window.rowHistoryPanel()->flushRefresh();
  window.diffPanel()->flushRefresh();
  window.compressionPanel()->flushRefresh();
}

// Waits until the engine is idle and a snapshot newer than `before` arrived.
// `before` is held (shared), so the new snapshot cannot be allocated at its
// address and the old one stays readable for comparisons afterwards.
// (Helpers are void: QVERIFY returns from them; callers check currentTestFailed.)
inline void waitForSnapshot(MainWindow& window, const SnapshotPtr& before) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != before.get() && !window.controller().busy(), kTimeout);
  flush(window);
}
// Deprecated: a raw `before` may be freed and its address reused by the new
// snapshot (the wait then times out). Pass window.context().snapshotPtr().
inline void waitForSnapshot(MainWindow& window, const SessionSnapshot* before) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != before && !window.controller().busy(), kTimeout);
  flush(window);
}

// Picks `fault` in the Session panel's Fault box, as a user does.
inline void chooseFault(MainWindow& window, const char* fault) {
  auto* box = window.sessionPanel()->findChild<QComboBox*>(QStringLiteral("fault"));
  QVERIFY(box != nullptr);
  const int index = box->findData(QString::fromUtf8(fault));
  QVERIFY2(index >= 0, fault);
  box->setCurrentIndex(index);
}

// Starts a session with `fault` and waits for its prefill.
inline void startWithFault(MainWindow& window, const char* fault) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
  chooseFault(window, fault);
  const SnapshotPtr before = window.context().snapshotPtr();
  window.controller().startSession(*window.sessionPanel()->sessionSpec());
  waitForSnapshot(window, before);
  if (QTest::currentTestFailed()) return;
  QCOMPARE(window.context().snapshot()->fault, std::string(fault));
}

// While alive, answers "Discard" to the window's "save first?" question
// (a diff or a new session after stepping replaces the unsaved session; the
// question itself is tested in unsaved_session_test).
class DiscardUnsaved {
 public:
  DiscardUnsaved() {
    QObject::connect(&timer_, &QTimer::timeout, [] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (box != nullptr && box->objectName() == QStringLiteral("saveFirstDialog")) box->button(QMessageBox::Discard)->click();
    });
    timer_.start(10);
  }

 private:
  QTimer timer_;
};

// Runs the diff of the session panel's settings with `fault` and waits for its report.
inline void runDiff(MainWindow& window, const char* fault) {
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
  chooseFault(window, fault);
  const SnapshotPtr before = window.context().snapshotPtr();
  const DiscardUnsaved discard;
  window.diffPanel()->runButton()->click();
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != before.get() && window.context().snapshot()->diff != nullptr &&
                               !window.controller().busy(),
                           kTimeout);
  flush(window);
}

// Steps the live session one round (F11 from the latest moment) and waits for its snapshot.
inline void stepRound(MainWindow& window) {
  if (!window.context().atLatest()) window.context().setCursor(window.context().latest());
  const int64_t before = window.context().latest().round;
  QTRY_VERIFY_WITH_TIMEOUT(window.stepRoundAction()->isEnabled(), kTimeout);
  window.stepRoundAction()->trigger();
  QTRY_VERIFY_WITH_TIMEOUT(window.context().latest().round > before && !window.controller().busy(), kTimeout);
  flush(window);
}

inline QMessageBox* errorDialog() {
  for (QWidget* widget : QApplication::topLevelWidgets()) {
    if (auto* box = qobject_cast<QMessageBox*>(widget); box && box->objectName() == "errorDialog" && box->isVisible()) {
      return box;
    }
  }
  return nullptr;
}

// Calls settle() until look() gives the same dock sizes three times in a row
// (at most `rounds` times): a layout pass queued by the one before (a restore
// of remembered sizes takes more than one) can still be pending after a
// single unchanged look.
template <typename Settle, typename Look>
QMap<QString, QSize> settledSizes(Settle settle, Look look, int rounds) {
  QMap<QString, QSize> sizes = look();
  int steady = 0;
  for (int i = 0; i < rounds && steady < 3; ++i) {
    settle();
    const QMap<QString, QSize> now = look();
    steady = now == sizes ? steady + 1 : 0;
    sizes = now;
  }
  return sizes;
}

inline void useTestSettings(const char* name) {
  QApplication::setOrganizationName(QStringLiteral("kvscope-tests"));
  QApplication::setApplicationName(QString::fromUtf8(name));
}

}  // namespace kvscope::ui::testing
