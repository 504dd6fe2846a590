#include "ui/engine/EngineController.h"

#include <QElapsedTimer>
#include <QMetaObject>
#include <algorithm>
#include <array>
#include <exception>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/cache/fault.h"
#include "core/capture/capture_file.h"
#include "core/check/capture_inspection.h"
#include "core/check/capture_models.h"
#include "core/check/capture_writer.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/error_text.h"
#include "core/runtime/exception_text.h"
#include "core/snapshot/snapshot_builder.h"

namespace kvscope::ui {

namespace {

// Run at full speed: at most ~20 snapshots a second reach the GUI; the last
// one always does (it is the job's result).
void runFast(EngineWorker& worker, const std::function<void(SnapshotPtr)>& show) {
  QElapsedTimer since_last;
  since_last.start();
  worker.engine().run(worker.cancelFlag(), [&](SnapshotPtr snapshot) {
    if (since_last.elapsed() < 50) return;
    worker.toGui([show, snapshot] { show(snapshot); });
    since_last.restart();
  });
}

// Run with a pause after each phase: a snapshot per phase, so every phase is seen.
void runPaced(EngineWorker& worker, const std::function<void(SnapshotPtr)>& show) {
  SessionController& engine = worker.engine();
  while (engine.hasSession() && !engine.finished() && !worker.cancelled()) {
    engine.stepPhase();
    worker.toGui([show, snapshot = engine.snapshot()] { show(snapshot); });
    // The pause in short slices: Stop, or a new speed, takes effect at once.
    QElapsedTimer paused;
    paused.start();
    while (!worker.cancelled() && paused.elapsed() < worker.phaseDelayMs()) QThread::msleep(10);
  }
}

struct OpenedCapture {
  SnapshotPtr snapshot;
  QString verdict;
  QStringList sequences;  // one label per sequence of the batch
  int shown = 0;
  QStringList ranks;  // one label per rank of a tensor-parallel run
  int shown_rank = 0;
};

// "rank 1 of 2: root cause", "rank 0 of 2: later breach", "rank 0 of 2": how
// the rank picker names each rank of a tensor-parallel run.
QStringList rankLabels(const std::vector<InspectedRank>& ranks) {
  QStringList out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const QString name = EngineController::tr("rank %1 of %2").arg(r).arg(ranks.size());
    out << (ranks[r].root_cause ? EngineController::tr("%1: root cause").arg(name)
            : ranks[r].breach   ? EngineController::tr("%1: later breach").arg(name)
                                : name);
  }
  return out;
}

// "sequence 1: root cause", "sequence 2: breach", "sequence 0: clean": how
// the sequence picker names each sequence of a batch.
QStringList sequenceLabels(const std::vector<InspectedSequence>& sequences) {
  QStringList out;
  for (size_t b = 0; b < sequences.size(); ++b) {
    const InspectedSequence& s = sequences[b];
    const QString verdict = s.root_cause   ? EngineController::tr("root cause")
                            : s.breach     ? EngineController::tr("breach")
                            : s.divergence ? EngineController::tr("divergence")
                                           : EngineController::tr("clean");
    out << EngineController::tr("sequence %1: %2").arg(b).arg(verdict);
  }
  return out;
}

OpenedCapture inspectCaptureOn(SessionController& engine, const std::vector<std::string>& paths, int sequence,
                               int rank) {
  const SessionController::LoadedModels loaded = engine.loaded();
  std::array<LoadedCaptureModel, kCaptureRoles> candidates;
  candidates[0] = {loaded.target, loaded.tokenizer, loaded.target_dir};
  candidates[1] = {loaded.drafter, loaded.tokenizer, loaded.drafter_dir};
  SnapshotBuilder builder;
  const CaptureInspection inspection = inspectCaptures(paths, candidates, builder, sequence, rank);
  engine.showReplay(inspection.snapshot);
  const CaptureCheckReport& report = inspection.report;
  const std::string verdict = report.root_cause          ? "root cause: " + report.root_cause->what
                              : report.first_divergence ? "symptom: " + report.first_divergence->what
                                                        : std::string("every call kept the cache contract");
  return {engine.snapshot(), QString::fromStdString(verdict), sequenceLabels(inspection.sequences),
          static_cast<int>(inspection.shown_sequence), rankLabels(inspection.ranks),
          static_cast<int>(inspection.shown_rank)};
}

// A capture is a file from anywhere: whatever opening it throws (a
// kvscope::Error, libtorch, the standard library) becomes one clear message
// for the error dialog, clipped and escaped, libtorch's without its backtrace.
OpenedCapture openCaptureOn(SessionController& engine, const std::vector<std::string>& paths, int sequence, int rank) {
  const std::string path = paths.empty() ? std::string() : paths.front();
  try {
    return inspectCaptureOn(engine, paths, sequence, rank);
  } catch (const std::exception& error) {
    throw Error(exceptionText(error));
  } catch (...) {
    throw Error(displayableError(path + ": opening it failed with an exception that is not an error kvscope knows"));
  }
}

void saveCaptureOf(SessionController& engine, const std::string& path) {
  const Session* session = engine.liveSession();
  if (session == nullptr) throw Error("saving " + path + ": no live session to capture");
  const SessionController::LoadedModels loaded = engine.loaded();
  writeSessionCapture(path, session->record(), {loaded.target_dir, loaded.target.get()},
                      {loaded.drafter_dir, loaded.drafter.get()},
                      std::string("kvscope (fault ") + faultInfo(session->options().fault).name + ")");
}

std::shared_ptr<const CausalLM> liveTargetFor(SessionController& engine, const std::string& what) {
  std::shared_ptr<const CausalLM> model = engine.liveTarget();
  if (!model) throw Error(what + ": no live session (load models, or leave the replayed trace)");
  return model;
}

// Why the loaded target is not the checkpoint a capture's target ran (the
// capture's config subset and embedding fingerprint, core/check/capture_models.h),
// "" when it is. Remembered per (capture, model): every cursor move asks, and
// the fingerprint reads the whole embedding. Engine thread only.
std::string captureTargetMismatch(const std::string& capture, const CausalLM& model) {
  thread_local std::string last_capture;
  thread_local const CausalLM* last_model = nullptr;
  thread_local std::string last_mismatch;
  if (capture != last_capture || &model != last_model) {
    const auto file = CaptureFile::open(capture);
    last_mismatch = captureModelMismatch(*file->manifest().model(CaptureRole::Target), model);
    last_capture = capture;
    last_model = &model;
  }
  return last_mismatch;
}

// "6 layers, 8 heads (2 kv heads) of 32".
std::string shapeOf(int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  return std::to_string(layers) + " layers, " + std::to_string(heads) + " heads (" + std::to_string(kv_heads) +
         " kv heads) of " + std::to_string(head_dim);
}

// Why the loaded target is not the one a trace names, "" when it is: the
// directory's name (a trace may record a path: its last part) or the
// architecture the CLI records, and the shape; only what differs is named.
std::string traceTargetMismatch(const RecordedTarget& recorded, const std::string& loaded_dir, const ModelConfig& config) {
  const std::string name = std::filesystem::path(loaded_dir).filename().string();
  const std::string recorded_name = std::filesystem::path(recorded.name).filename().string();
  std::vector<std::string> differences;
  if (recorded_name != name && recorded.name != config.architecture_name) {
    differences.push_back("the trace names '" + recorded.name + "', the loaded target is '" + name + "'");
  }
  if (config.num_layers != recorded.layers || config.num_heads != recorded.heads ||
      config.num_kv_heads != recorded.kv_heads || config.head_dim != recorded.head_dim) {
    differences.push_back("the trace's target has " +
                          shapeOf(recorded.layers, recorded.heads, recorded.kv_heads, recorded.head_dim) +
                          ", the loaded one " +
                          shapeOf(config.num_layers, config.num_heads, config.num_kv_heads, config.head_dim));
  }
  std::string out;
  for (const std::string& d : differences) out += (out.empty() ? "" : "; ") + d;
  return out;
}

// The loaded target, for explaining a replayed moment: only when it is the
// model the trace or capture ran, else an error that names the difference
// and says which model to load.
std::shared_ptr<const CausalLM> loadedTargetMatching(SessionController& engine, const RecordedTarget& recorded) {
  const SessionController::LoadedModels loaded = engine.loaded();
  if (!loaded.target) {
    throw Error("a replayed " + std::string(recorded.capture_file.empty() ? "trace" : "capture") +
                " keeps no weights and no target is loaded: load its target '" + recorded.name + "' (" +
                shapeOf(recorded.layers, recorded.heads, recorded.kv_heads, recorded.head_dim) +
                ") to explain its moments");
  }
  const std::string mismatch = recorded.capture_file.empty()
                                   ? traceTargetMismatch(recorded, loaded.target_dir, loaded.target->config())
                                   : captureTargetMismatch(recorded.capture_file, *loaded.target);
  if (!mismatch.empty()) {
    throw Error("the loaded target (" + loaded.target_dir + ") is not the model " +
                (recorded.capture_file.empty() ? "the trace" : "the capture's target") + " ran ('" + recorded.name +
                "'): " + mismatch + ". Load that model to explain its moments");
  }
  return loaded.target;
}

}  // namespace

EngineController::EngineController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<kvscope::ui::SnapshotPtr>("kvscope::ui::SnapshotPtr");
  qRegisterMetaType<kvscope::ui::SnapshotReason>("kvscope::ui::SnapshotReason");
  qRegisterMetaType<kvscope::ui::ExplanationPtr>("kvscope::ui::ExplanationPtr");
  qRegisterMetaType<kvscope::ui::WhatIfPtr>("kvscope::ui::WhatIfPtr");
  qRegisterMetaType<kvscope::ui::CompressionRunPtr>("kvscope::ui::CompressionRunPtr");
  thread_.setObjectName(QStringLiteral("kvscope-engine"));
  worker_ = new EngineWorker(&cancel_, &phase_delay_ms_, this);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
}

EngineController::~EngineController() {
  cancel_ = true;
  thread_.quit();
  thread_.wait();
}

void EngineController::invoke(Job job) {
  QMetaObject::invokeMethod(worker_, [this, worker = worker_, job = std::move(job)] {
    // On the engine thread: only the worker and toGui() from here.
    if (job.busy) worker->toGui([this, what = job.what] { setBusy(true, what); });
    QString message;
    try {
      job.work(*worker);
    } catch (const std::exception& error) {
      message = QString::fromUtf8(error.what());
    } catch (...) {
      message = QStringLiteral("unknown error");
    }
    if (!message.isEmpty()) {
      spdlog::error("{}: {}", job.what.toStdString(), message.toStdString());
      worker->toGui([this, failed = job.failed, what = job.what, message] {
        if (failed) failed(message);
        else emit this->failed(what, message);
      });
    }
    if (job.busy) worker->toGui([this] { setBusy(false, QString()); });
  }, Qt::QueuedConnection);
}

void EngineController::setBusy(bool busy, const QString& what) {
  busy_ = busy;
  if (!busy && running_) {
    running_ = false;
    emit runningChanged(false);
  }
  emit busyChanged(busy, what);
}

void EngineController::invokeSnapshot(const QString& what, std::function<void(SessionController&)> work,
                                      SnapshotReason reason) {
  invoke(what, [work](EngineWorker& worker) {
    work(worker.engine());
    return worker.engine().snapshot();
  }, [this, reason](SnapshotPtr snapshot) { emit snapshotReady(std::move(snapshot), reason); });
}

void EngineController::startRunning() {
  cancel_ = false;
  running_ = true;
  emit runningChanged(true);
}

void EngineController::loadModels(const ModelSpec& spec) {
  invoke(tr("Loading models"), [this, spec](EngineWorker& worker) {
    return worker.engine().loadModels(spec, [this, &worker](int step, int total, const std::string& what) {
      worker.toGui([this, step, total, what = QString::fromStdString(what)] { emit progress(step, total, what); });
    });
  }, [this](const LoadResult& result) {
    QStringList notes;
    for (const std::string& note : result.notes) notes << QString::fromStdString(note);
    emit modelsLoaded(QString::fromStdString(result.target_dir), QString::fromStdString(result.drafter_dir),
                      QString::fromStdString(result.drafter_name), notes);
  });
}

void EngineController::startSession(const SessionSpec& spec, bool run_prefill) {
  cancel_ = false;
  invokeSnapshot(tr("Starting the session"), [spec, run_prefill](SessionController& engine) {
    engine.startSession(spec);
    if (run_prefill) engine.stepPhase();
  }, SnapshotReason::NewSession);
}

void EngineController::stepPhase() {
  invokeSnapshot(tr("Step phase"), [](SessionController& engine) { engine.stepPhase(); }, SnapshotReason::Step);
}

void EngineController::stepRound() {
  invokeSnapshot(tr("Step round"), [](SessionController& engine) { engine.stepRound(); }, SnapshotReason::Step);
}

void EngineController::showSequence(int sequence) {
  invokeSnapshot(tr("Showing sequence %1").arg(sequence),
                 [sequence](SessionController& engine) { engine.showSequence(sequence); }, SnapshotReason::Sequence);
}

void EngineController::run() {
  startRunning();
  const auto show = [this](SnapshotPtr snapshot) { emit snapshotReady(std::move(snapshot), SnapshotReason::Step); };
  invoke(tr("Running"), [show](EngineWorker& worker) {
    if (worker.phaseDelayMs() > 0) runPaced(worker, show);
    else runFast(worker, show);
    return worker.engine().snapshot();
  }, show);
}

void EngineController::stop() { cancel_ = true; }

void EngineController::setPhaseDelay(int milliseconds) { phase_delay_ms_ = std::clamp(milliseconds, 0, kMaxPhaseDelayMs); }

void EngineController::runDiff(const SessionSpec& spec) {
  startRunning();
  invoke(tr("Diff cached vs uncached"), [spec](EngineWorker& worker) {
    worker.engine().runDiff(spec, worker.cancelFlag());
    return worker.engine().snapshot();
  }, [this](SnapshotPtr snapshot) { emit snapshotReady(std::move(snapshot), SnapshotReason::Diff); });
}

void EngineController::auditAt(const Moment& moment) {
  invokeSnapshot(tr("Cache audit"), [moment](SessionController& engine) { engine.auditAt(moment); },
                 SnapshotReason::Audit);
}

void EngineController::saveTrace(const QString& path, const QString& gui_state_json) {
  invoke(tr("Saving the trace"), [path, gui_state_json](EngineWorker& worker) {
    worker.engine().saveTrace(path.toStdString(), gui_state_json.toStdString());
    return path;
  }, [this](const QString& saved) { emit traceSaved(saved); });
}

void EngineController::openTrace(const QString& path) {
  invoke(tr("Opening the trace"), [path](EngineWorker& worker) {
    std::string gui_state;
    SnapshotPtr snapshot = worker.engine().openTrace(path.toStdString(), &gui_state);
    return std::make_pair(std::move(snapshot), QString::fromStdString(gui_state));
  }, [this, path](const std::pair<SnapshotPtr, QString>& opened) {
    emit snapshotReady(opened.first, SnapshotReason::Trace);
    emit traceOpened(path, opened.second);
  });
}

void EngineController::openCapture(const QStringList& paths, int sequence, int rank) {
  std::vector<std::string> files;
  for (const QString& path : paths) files.push_back(path.toStdString());
  invoke(tr("Opening the capture"), [files, sequence, rank](EngineWorker& worker) {
    return openCaptureOn(worker.engine(), files, sequence, rank);
  }, [this, paths](const OpenedCapture& opened) {
    const QString path = paths.size() == 1 ? paths.front()
                                           : tr("%1 and %2 more rank(s)").arg(paths.front()).arg(paths.size() - 1);
    emit snapshotReady(opened.snapshot, SnapshotReason::Trace);
    emit ranksOpened(opened.ranks, opened.shown_rank);
    emit captureOpened(path, opened.verdict, opened.sequences, opened.shown);
  });
}

void EngineController::saveCapture(const QString& path) {
  invoke(tr("Saving the capture"), [path](EngineWorker& worker) {
    saveCaptureOf(worker.engine(), path.toStdString());
    return path;
  }, [this](const QString& saved) { emit captureSaved(saved); });
}

void EngineController::explain(const ExplainRequest& request, bool what_if, std::optional<RecordedTarget> replayed) {
  Job job{tr("Explaining attention"), [this, request, what_if, replayed](EngineWorker& worker) {
    const auto model = replayed ? loadedTargetMatching(worker.engine(), *replayed)
                                : liveTargetFor(worker.engine(), "explaining attention");
    if (what_if) {
      auto result = std::make_shared<const WhatIfExplanation>(explainWhatIf(*model, request));
      worker.toGui([this, result] { emit whatIfReady(result); });
    } else {
      auto result = std::make_shared<const AttentionExplanation>(explainAttention(*model, request));
      worker.toGui([this, result] { emit explained(result); });
    }
  }, [this](const QString& message) { emit explainFailed(message); }, /*busy=*/false};
  invoke(std::move(job));
}

void EngineController::compress(const CompressionRequest& request) {
  invoke(Job{tr("Compression lab"), [this, request](EngineWorker& worker) {
    const auto model = liveTargetFor(worker.engine(), "compression lab");
    auto run = std::make_shared<const CompressionRun>(runCompressionSlots(*model, request));
    worker.toGui([this, run] { emit compressed(run); });
  }, [this, id = request.id](const QString& message) { emit compressionFailed(id, message); }, true});
}

}  // namespace kvscope::ui
