#pragma once
// The engine thread's side of the bridge: owns the core (the
// SessionController) and runs the jobs EngineController::invoke posts, one at
// a time, in order. A job reaches the GUI only through toGui(); it never
// touches a widget or the controller's state itself. There is no method per
// action here: an action is a job (EngineController.h).
#include <QObject>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>

#include "core/explain/attention_explanation.h"
#include "core/control/session_controller.h"
#include "ui/engine/CompressionJob.h"
#include "ui/context/DebuggerContext.h"

namespace kvscope::ui {

using ExplanationPtr = std::shared_ptr<const AttentionExplanation>;
using WhatIfPtr = std::shared_ptr<const WhatIfExplanation>;

constexpr int kMaxPhaseDelayMs = 2000;

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  // `cancel`: set by the GUI to stop a run between phases; `phase_delay_ms`:
  // Run's pause after each phase; `gui`: the object whose thread toGui()
  // delivers to (the controller).
  EngineWorker(std::atomic<bool>* cancel, const std::atomic<int>* phase_delay_ms, QObject* gui);
  ~EngineWorker() override;

  SessionController& engine() { return *engine_; }
  bool cancelled() const { return cancel_->load(); }
  const std::atomic<bool>& cancelFlag() const { return *cancel_; }
  int phaseDelayMs() const { return phase_delay_ms_->load(); }

  // Runs `deliver` on the GUI thread, after everything delivered before it.
  // The controller outlives every job (its destructor stops this thread
  // first); deliveries still queued when it goes are dropped by Qt.
  void toGui(std::function<void()> deliver) const;

 private:
  std::unique_ptr<SessionController> engine_;
  std::atomic<bool>* cancel_;
  const std::atomic<int>* phase_delay_ms_;
  QObject* gui_;
};

}  // namespace kvscope::ui
