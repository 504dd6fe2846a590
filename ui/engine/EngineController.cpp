#include "ui/engine/EngineController.h"

#include <QMetaObject>
#include <algorithm>

namespace kvscope::ui {

EngineController::EngineController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<kvscope::ui::SnapshotPtr>("kvscope::ui::SnapshotPtr");
  qRegisterMetaType<kvscope::ui::SnapshotReason>("kvscope::ui::SnapshotReason");
  qRegisterMetaType<kvscope::ui::ExplanationPtr>("kvscope::ui::ExplanationPtr");
  qRegisterMetaType<kvscope::ui::WhatIfPtr>("kvscope::ui::WhatIfPtr");
  qRegisterMetaType<kvscope::ui::CompressionRunPtr>("kvscope::ui::CompressionRunPtr");
  thread_.setObjectName(QStringLiteral("kvscope-engine"));
  worker_ = new EngineWorker(&cancel_, &phase_delay_ms_);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &EngineWorker::busyChanged, this, [this](bool busy, const QString& what) {
    busy_ = busy;
    if (!busy && running_) {
      running_ = false;
      emit runningChanged(false);
    }
    emit busyChanged(busy, what);
  });
  connect(worker_, &EngineWorker::progress, this, &EngineController::progress);
  connect(worker_, &EngineWorker::modelsLoaded, this, &EngineController::modelsLoaded);
  connect(worker_, &EngineWorker::snapshotReady, this, &EngineController::snapshotReady);
  connect(worker_, &EngineWorker::failed, this, &EngineController::failed);
  connect(worker_, &EngineWorker::traceSaved, this, &EngineController::traceSaved);
  connect(worker_, &EngineWorker::traceOpened, this, &EngineController::traceOpened);
  connect(worker_, &EngineWorker::captureOpened, this, &EngineController::captureOpened);
  connect(worker_, &EngineWorker::captureSaved, this, &EngineController::captureSaved);
  connect(worker_, &EngineWorker::explained, this, &EngineController::explained);
  connect(worker_, &EngineWorker::whatIfReady, this, &EngineController::whatIfReady);
  connect(worker_, &EngineWorker::explainFailed, this, &EngineController::explainFailed);
  connect(worker_, &EngineWorker::compressed, this, &EngineController::compressed);
  connect(worker_, &EngineWorker::compressionFailed, this, &EngineController::compressionFailed);
  thread_.start();
}

EngineController::~EngineController() {
  cancel_ = true;
  thread_.quit();
  thread_.wait();
}

template <typename Job>
void EngineController::post(Job job) {
  QMetaObject::invokeMethod(worker_, std::move(job), Qt::QueuedConnection);
}

void EngineController::loadModels(const ModelSpec& spec) {
  post([worker = worker_, spec] { worker->loadModels(spec); });
}

void EngineController::startSession(const SessionSpec& spec, bool run_prefill) {
  cancel_ = false;
  post([worker = worker_, spec, run_prefill] { worker->startSession(spec, run_prefill); });
}

void EngineController::stepPhase() {
  post([worker = worker_] { worker->stepPhase(); });
}

void EngineController::stepRound() {
  post([worker = worker_] { worker->stepRound(); });
}

void EngineController::run() {
  cancel_ = false;
  running_ = true;
  emit runningChanged(true);
  post([worker = worker_] { worker->run(); });
}

void EngineController::stop() { cancel_ = true; }

void EngineController::setPhaseDelay(int milliseconds) { phase_delay_ms_ = std::clamp(milliseconds, 0, kMaxPhaseDelayMs); }

void EngineController::runDiff(const SessionSpec& spec) {
  cancel_ = false;
  running_ = true;
  emit runningChanged(true);
  post([worker = worker_, spec] { worker->runDiff(spec); });
}

void EngineController::auditAt(const Moment& moment) {
  post([worker = worker_, moment] { worker->auditAt(moment); });
}

void EngineController::saveTrace(const QString& path, const QString& gui_state_json) {
  post([worker = worker_, path, gui_state_json] { worker->saveTrace(path, gui_state_json); });
}

void EngineController::openTrace(const QString& path) {
  post([worker = worker_, path] { worker->openTrace(path); });
}

void EngineController::openCapture(const QString& path) {
  post([worker = worker_, path] { worker->openCapture(path); });
}

void EngineController::saveCapture(const QString& path) {
  post([worker = worker_, path] { worker->saveCapture(path); });
}

void EngineController::explain(const ExplainRequest& request, bool what_if) {
  post([worker = worker_, request, what_if] { worker->explain(request, what_if); });
}

void EngineController::compress(const CompressionRequest& request) {
  post([worker = worker_, request] { worker->compress(request); });
}

}  // namespace kvscope::ui
