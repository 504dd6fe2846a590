#pragma once
// An spdlog sink that forwards each formatted message to the LogBridge
// (queued to the GUI thread by the receivers' connections).
#include <mutex>

#include <spdlog/sinks/base_sink.h>

#include "ui/logging/LogBridge.h"

namespace kvscope::ui {

class QtLogSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    QString text = QString::fromUtf8(formatted.data(), static_cast<int>(formatted.size())).trimmed();
    LogBridge::instance()->post(static_cast<int>(msg.level), text);
  }
  void flush_() override {}
};

}  // namespace kvscope::ui
