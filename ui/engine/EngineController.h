#pragma once
// The GUI-thread handle of the engine: owns the engine thread and the
// EngineWorker on it. Every request goes through one mechanism, invoke(): a
// job runs on the engine thread with the core, its result is delivered back
// on the GUI thread, and the job is bracketed with busyChanged and its errors
// reported as failed() (as RenderDoc's replay manager does). A new action is
// one function here (or one invoke() call where the GUI asks for it). Stop
// sets a cancel flag the core checks between phases; the GUI never waits.
#include <QObject>
#include <QThread>
#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "ui/engine/EngineWorker.h"

namespace kvscope::ui {

// The target a replayed trace (or capture) names: a trace keeps no weights,
// so a replayed moment is explained with the loaded target only when that is
// the model it ran (a trace: this name and shape; a capture: its fingerprint).
struct RecordedTarget {
  std::string name;  // the model directory's name (the GUI's traces) or its architecture (the CLI's)
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // The .kvcapture it was opened from, empty for a trace: a capture's target
  // is matched by its config and embedding fingerprint, not by its name (a
  // path, or a hub id, that names the same checkpoint many ways).
  std::string capture_file;
};

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  bool busy() const { return busy_; }
  bool running() const { return running_; }

  // One request to the engine. `work` runs on the engine thread and may
  // deliver results early with EngineWorker::toGui (a run's snapshots);
  // `failed` (on the GUI thread) receives an error, by default failed(what,
  // message), a dialog; `busy`: bracket with busyChanged(true, what).
  struct Job {
    QString what;
    std::function<void(EngineWorker&)> work;
    std::function<void(const QString& message)> failed;
    bool busy = true;
  };
  void invoke(Job job);
  // The common case: `work(engine)` returns a value on the engine thread,
  // `deliver(value)` receives it on the GUI thread.
  template <typename Work, typename Deliver>
  void invoke(const QString& what, Work work, Deliver deliver) {
    invoke(Job{what, [work, deliver](EngineWorker& worker) {
                 auto result = work(worker);
                 worker.toGui([deliver, result]() mutable { deliver(std::move(result)); });
               }, {}, true});
  }

  void loadModels(const ModelSpec& spec);
  void startSession(const SessionSpec& spec, bool run_prefill = true);
  void stepPhase();
  void stepRound();
  // Of a live batch: shows sequence `sequence` in every panel (SnapshotReason::Sequence).
  void showSequence(int sequence);
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
  // Another engine's capture, checked against the loaded models when they
  // are the captured checkpoints (else the directories it names; else its
  // structure only) and shown in place of the live session; the live session
  // written as a capture (core/check/capture_writer.h).
  // sequence: of a batch, the one the views show (-1: the root cause's).
  // Several paths: every rank's capture of one tensor-parallel run, shown on
  // `rank` (-1: the root cause's rank).
  void openCapture(const QStringList& paths, int sequence = -1, int rank = -1);
  void saveCapture(const QString& path);
  // Attention step by step / what if for one query of the live target.
  // Quiet: no busyChanged (milliseconds on small models); errors go to
  // explainFailed, for the panel that asked, not to a dialog.
  void explain(const ExplainRequest& request, bool what_if, std::optional<RecordedTarget> replayed = std::nullopt);
  // The compression lab, one or two slots (CompressionJob.h), on the live
  // target; errors go to compressionFailed, for the panel that asked.
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
  // verdict: one line (clean, or the root cause) for the status bar;
  // sequences: one label per sequence of the batch (SequencePicker), shown: the one the views show.
  void captureOpened(const QString& path, const QString& verdict, const QStringList& sequences, int shown);
  // Before captureOpened, for every capture: one label per rank of a
  // tensor-parallel run ("rank 1 of 2: root cause"; empty for one file), shown: the rank the views show.
  void ranksOpened(const QStringList& ranks, int shown);
  void captureSaved(const QString& path);
  void explained(kvscope::ui::ExplanationPtr explanation);
  void whatIfReady(kvscope::ui::WhatIfPtr result);
  void explainFailed(const QString& message);
  void compressed(kvscope::ui::CompressionRunPtr run);
  void compressionFailed(qint64 request_id, const QString& message);

 private:
  void setBusy(bool busy, const QString& what);
  // A job that delivers the core's snapshot for `reason`.
  void invokeSnapshot(const QString& what, std::function<void(SessionController&)> work, SnapshotReason reason);
  void startRunning();

  QThread thread_;
  EngineWorker* worker_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::atomic<int> phase_delay_ms_{0};
  bool busy_ = false;
  bool running_ = false;
};

}  // namespace kvscope::ui
