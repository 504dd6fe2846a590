#pragma once
// Shared helpers of the GUI tests: the fixture model pair, waiting for the
// worker thread, flushing the panels' coalesced redraws, finding the error dialog.
#include <QApplication>
#include <QMessageBox>
#include <QtTest>

#include "ui/windows/AttentionPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui::testing {

constexpr int kTimeout = 120000;

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
}

// Steps one round and waits until its snapshot arrived.
inline void stepRound(MainWindow& window) {
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

inline void useTestSettings(const char* name) {
  QApplication::setOrganizationName(QStringLiteral("kvscope-tests"));
  QApplication::setApplicationName(QString::fromUtf8(name));
}

}  // namespace kvscope::ui::testing
