#pragma once
// Lives on the engine thread and owns the core (the SessionController).
// The GUI calls it only through queued invocations; results come back as
// signals carrying plain snapshots copied on this thread.
#include <QObject>
#include <QString>
#include <QStringList>
#include <atomic>
#include <memory>

#include "core/inspect/attention_explanation.h"
#include "core/inspect/session_controller.h"
#include "ui/engine/CompressionJob.h"
#include "ui/context/DebuggerContext.h"

namespace kvscope::ui {

using ExplanationPtr = std::shared_ptr<const AttentionExplanation>;
using WhatIfPtr = std::shared_ptr<const WhatIfExplanation>;

constexpr int kMaxPhaseDelayMs = 2000;

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  // `phase_delay_ms`: Run's pause after each phase (EngineController::setPhaseDelay).
  EngineWorker(std::atomic<bool>* cancel, const std::atomic<int>* phase_delay_ms);
  ~EngineWorker() override;

  // Each runs the job on this thread; call via EngineController.
  void loadModels(const ModelSpec& spec);
  void startSession(const SessionSpec& spec, bool run_prefill);
  void stepPhase();
  void stepRound();
  void run();
  void runDiff(const SessionSpec& spec);
  void auditAt(const Moment& moment);
  void saveTrace(const QString& path, const QString& gui_state_json);
  void openTrace(const QString& path);
  // Reads and checks another engine's capture against the loaded models
  // when they are the captured checkpoints (else the directories it names;
  // else its structure only) and shows it in place of the live session.
  void openCapture(const QString& path);
  // Writes the live session as a capture (core/check/capture_writer.h).
  void saveCapture(const QString& path);
  // Explains one query of the live session's target (what_if: the request's
  // edit too). Quiet: no busyChanged (milliseconds on small models); errors
  // go to explainFailed, for the panel that asked, not to a dialog.
  void explain(const ExplainRequest& request, bool what_if);
  // The compression lab on the live session's target (CompressionJob.h).
  // Brackets itself with busyChanged (a long prompt takes seconds); its
  // errors go to the panel that asked (compressed, or compressionFailed
  // when there is no live target), not to a dialog.
  void compress(const CompressionRequest& request);

 signals:
  void busyChanged(bool busy, const QString& what);
  void progress(int step, int total, const QString& what);
  void modelsLoaded(const QString& target_dir, const QString& drafter_dir, const QString& drafter_name,
                    const QStringList& notes);
  void snapshotReady(kvscope::ui::SnapshotPtr snapshot, kvscope::ui::SnapshotReason reason);
  void failed(const QString& what, const QString& message);
  void traceSaved(const QString& path);
  void traceOpened(const QString& path, const QString& gui_state_json);
  // verdict: one line (clean, or the root cause) for the status bar.
  void captureOpened(const QString& path, const QString& verdict);
  void captureSaved(const QString& path);
  void explained(kvscope::ui::ExplanationPtr explanation);
  void whatIfReady(kvscope::ui::WhatIfPtr result);
  void explainFailed(const QString& message);
  void compressed(kvscope::ui::CompressionRunPtr run);
  void compressionFailed(qint64 request_id, const QString& message);

 private:
  // Runs job, reports exceptions as failed(what, ...), brackets it with busyChanged.
  template <typename Job>
  void guarded(const QString& what, Job job);

  // Run with a pause after each phase: a snapshot per phase, so every phase is seen.
  void runPaced();

  std::unique_ptr<SessionController> engine_;
  std::atomic<bool>* cancel_;
  const std::atomic<int>* phase_delay_ms_;
};

}  // namespace kvscope::ui
