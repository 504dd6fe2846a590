#include "ui/engine/EngineWorker.h"

#include <QMetaObject>

namespace kvscope::ui {

EngineWorker::EngineWorker(std::atomic<bool>* cancel, const std::atomic<int>* phase_delay_ms, QObject* gui)
    : engine_(std::make_unique<SessionController>()), cancel_(cancel), phase_delay_ms_(phase_delay_ms), gui_(gui) {}

EngineWorker::~EngineWorker() = default;

void EngineWorker::toGui(std::function<void()> deliver) const {
  QMetaObject::invokeMethod(gui_, std::move(deliver), Qt::QueuedConnection);
}

}  // namespace kvscope::ui
