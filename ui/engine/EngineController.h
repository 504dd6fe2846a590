#pragma once
// The GUI-thread handle of the engine: owns the worker thread and the
// EngineWorker on it, posts jobs to it, and re-emits its results. Stop sets
// a cancel flag the worker checks between rounds; the GUI never waits.
#include <QObject>
#include <QThread>
#include <atomic>

#include "ui/engine/EngineWorker.h"

namespace kvscope::ui {

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  bool busy() const { return busy_; }
  bool running() const { return running_; }

  void loadModels(const ModelSpec& spec);
  void startSession(const SessionSpec& spec, bool run_prefill = true);
  void stepPhase();
  void stepRound();
  void run();
  void stop();  // cancels a run (or a diff) after the phase in progress
  // Playback speed of Run: a pause after each phase (0 to 2000 ms) so a
  // class can watch a round happen; 0 runs at full speed. Takes effect at
  // once, also during a run.
  void setPhaseDelay(int milliseconds);
  int phaseDelay() const { return phase_delay_ms_.load(); }
  // Restarts the session and diffs it to the end (Stop cancels).
  void runDiff(const SessionSpec& spec);
  // Audits both caches at a recorded moment; the session is not stepped.
  void auditAt(const Moment& moment);
  void saveTrace(const QString& path, const QString& gui_state_json);
  void openTrace(const QString& path);
  // Another engine's capture, checked and shown (EngineWorker::openCapture);
  // the live session written as a capture (EngineWorker::saveCapture).
  void openCapture(const QString& path);
  void saveCapture(const QString& path);
  // Attention step by step / what if for one query (EngineWorker::explain).
  void explain(const ExplainRequest& request, bool what_if);
  // The compression lab, one or two slots (EngineWorker::compress).
  void compress(const kvscope::ui::CompressionRequest& request);

 signals:
  void busyChanged(bool busy, const QString& what);
  void runningChanged(bool running);
  void progress(int step, int total, const QString& what);
  void modelsLoaded(const QString& target_dir, const QString& drafter_dir, const QString& drafter_name,
                    const QStringList& notes);
  void snapshotReady(kvscope::ui::SnapshotPtr snapshot, kvscope::ui::SnapshotReason reason);
  void failed(const QString& what, const QString& message);
  void traceSaved(const QString& path);
  void traceOpened(const QString& path, const QString& gui_state_json);
  void captureOpened(const QString& path, const QString& verdict);
  void captureSaved(const QString& path);
  void explained(kvscope::ui::ExplanationPtr explanation);
  void whatIfReady(kvscope::ui::WhatIfPtr result);
  void explainFailed(const QString& message);
  void compressed(kvscope::ui::CompressionRunPtr run);
  void compressionFailed(qint64 request_id, const QString& message);

 private:
  template <typename Job>
  void post(Job job);

  QThread thread_;
  EngineWorker* worker_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::atomic<int> phase_delay_ms_{0};
  bool busy_ = false;
  bool running_ = false;
};

}  // namespace kvscope::ui
