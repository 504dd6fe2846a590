#include "ui/engine/EngineWorker.h"

#include <QElapsedTimer>
#include <QThread>
#include <exception>

#include <spdlog/spdlog.h>

#include "core/cache/fault.h"
#include "core/check/capture_inspection.h"
#include "core/check/capture_writer.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/inspect/snapshot_builder.h"

namespace kvscope::ui {

EngineWorker::EngineWorker(std::atomic<bool>* cancel, const std::atomic<int>* phase_delay_ms)
    : engine_(std::make_unique<SessionController>()), cancel_(cancel), phase_delay_ms_(phase_delay_ms) {}

EngineWorker::~EngineWorker() = default;

template <typename Job>
void EngineWorker::guarded(const QString& what, Job job) {
  emit busyChanged(true, what);
  try {
    job();
  } catch (const std::exception& error) {
    spdlog::error("{}: {}", what.toStdString(), error.what());
    emit failed(what, QString::fromUtf8(error.what()));
  } catch (...) {
    spdlog::error("{}: unknown error", what.toStdString());
    emit failed(what, QStringLiteral("unknown error"));
  }
  emit busyChanged(false, QString());
}

void EngineWorker::loadModels(const ModelSpec& spec) {
  guarded(QStringLiteral("Loading models"), [&] {
    const LoadResult result = engine_->loadModels(spec, [this](int step, int total, const std::string& what) {
      emit progress(step, total, QString::fromStdString(what));
    });
    QStringList notes;
    for (const std::string& note : result.notes) notes << QString::fromStdString(note);
    emit modelsLoaded(QString::fromStdString(result.target_dir), QString::fromStdString(result.drafter_dir),
                      QString::fromStdString(result.drafter_name), notes);
  });
}

void EngineWorker::startSession(const SessionSpec& spec, bool run_prefill) {
  guarded(QStringLiteral("Starting the session"), [&] {
    engine_->startSession(spec);
    if (run_prefill) engine_->stepPhase();
    emit snapshotReady(engine_->snapshot(), SnapshotReason::NewSession);
  });
}

void EngineWorker::stepPhase() {
  guarded(QStringLiteral("Step phase"), [&] {
    engine_->stepPhase();
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Step);
  });
}

void EngineWorker::stepRound() {
  guarded(QStringLiteral("Step round"), [&] {
    engine_->stepRound();
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Step);
  });
}

void EngineWorker::run() {
  guarded(QStringLiteral("Running"), [&] {
    if (phase_delay_ms_->load() > 0) {
      runPaced();
      return;
    }
    QElapsedTimer since_last;
    since_last.start();
    SnapshotPtr pending;
    engine_->run(*cancel_, [&](SnapshotPtr snapshot) {
      // At most ~20 snapshots a second reach the GUI; the last one always does.
      pending = std::move(snapshot);
      if (since_last.elapsed() >= 50) {
        emit snapshotReady(std::move(pending), SnapshotReason::Step);
        pending.reset();
        since_last.restart();
      }
    });
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Step);
  });
}

void EngineWorker::runPaced() {
  while (engine_->hasSession() && !engine_->finished() && !cancel_->load()) {
    engine_->stepPhase();
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Step);
    // The pause in short slices: Stop, or a new speed, takes effect at once.
    QElapsedTimer paused;
    paused.start();
    while (!cancel_->load() && paused.elapsed() < phase_delay_ms_->load()) QThread::msleep(10);
  }
}

void EngineWorker::runDiff(const SessionSpec& spec) {
  guarded(QStringLiteral("Diff cached vs uncached"), [&] {
    engine_->runDiff(spec, *cancel_);
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Diff);
  });
}

void EngineWorker::auditAt(const Moment& moment) {
  guarded(QStringLiteral("Cache audit"), [&] {
    engine_->auditAt(moment);
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Audit);
  });
}

void EngineWorker::saveTrace(const QString& path, const QString& gui_state_json) {
  guarded(QStringLiteral("Saving the trace"), [&] {
    engine_->saveTrace(path.toStdString(), gui_state_json.toStdString());
    emit traceSaved(path);
  });
}

void EngineWorker::openTrace(const QString& path) {
  guarded(QStringLiteral("Opening the trace"), [&] {
    std::string gui_state;
    SnapshotPtr snapshot = engine_->openTrace(path.toStdString(), &gui_state);
    emit snapshotReady(std::move(snapshot), SnapshotReason::Trace);
    emit traceOpened(path, QString::fromStdString(gui_state));
  });
}

void EngineWorker::openCapture(const QString& path) {
  guarded(QStringLiteral("Opening the capture"), [&] {
    const SessionController::LoadedModels loaded = engine_->loaded();
    std::array<LoadedCaptureModel, kCaptureRoles> candidates;
    candidates[0] = {loaded.target, loaded.tokenizer, loaded.target_dir};
    candidates[1] = {loaded.drafter, loaded.tokenizer, loaded.drafter_dir};
    SnapshotBuilder builder;
    const CaptureInspection inspection = inspectCapture(path.toStdString(), candidates, builder);
    engine_->showReplay(inspection.snapshot);
    emit snapshotReady(engine_->snapshot(), SnapshotReason::Trace);
    const CaptureCheckReport& report = inspection.report;
    const std::string verdict = report.root_cause          ? "root cause: " + report.root_cause->what
                                : report.first_divergence ? "symptom: " + report.first_divergence->what
                                                          : std::string("every call kept the cache contract");
    emit captureOpened(path, QString::fromStdString(verdict));
  });
}

void EngineWorker::saveCapture(const QString& path) {
  guarded(QStringLiteral("Saving the capture"), [&] {
    const Session* session = engine_->liveSession();
    if (session == nullptr) throw Error("saving " + path.toStdString() + ": no live session to capture");
    const SessionController::LoadedModels loaded = engine_->loaded();
    writeSessionCapture(path.toStdString(), session->record(), {loaded.target_dir, loaded.target.get()},
                        {loaded.drafter_dir, loaded.drafter.get()},
                        std::string("kvscope (fault ") + faultInfo(session->options().fault).name + ")");
    emit captureSaved(path);
  });
}

void EngineWorker::explain(const ExplainRequest& request, bool what_if) {
  try {
    const std::shared_ptr<const CausalLM> model = engine_->liveTarget();
    if (!model) throw Error("explaining attention: no live session (load models, or leave the replayed trace)");
    if (what_if) {
      emit whatIfReady(std::make_shared<const WhatIfExplanation>(explainWhatIf(*model, request)));
    } else {
      emit explained(std::make_shared<const AttentionExplanation>(explainAttention(*model, request)));
    }
  } catch (const std::exception& error) {
    spdlog::warn("explaining attention: {}", error.what());
    emit explainFailed(QString::fromUtf8(error.what()));
  }
}

void EngineWorker::compress(const CompressionRequest& request) {
  emit busyChanged(true, QStringLiteral("Compression lab"));
  try {
    const std::shared_ptr<const CausalLM> model = engine_->liveTarget();
    if (!model) throw Error("compression lab: no live session (load models, or leave the replayed trace)");
    emit compressed(std::make_shared<const CompressionRun>(runCompressionSlots(*model, request)));
  } catch (const std::exception& error) {
    spdlog::warn("compression lab: {}", error.what());
    emit compressionFailed(request.id, QString::fromUtf8(error.what()));
  }
  emit busyChanged(false, QString());
}

}  // namespace kvscope::ui
