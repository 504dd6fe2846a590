#include "ui/logging/LogBridge.h"

#include <memory>

#include <spdlog/spdlog.h>

#include "ui/logging/QtLogSink.h"

namespace kvscope::ui {

LogBridge* LogBridge::instance() {
  static LogBridge* bridge = new LogBridge;  // lives for the whole program
  return bridge;
}

void LogBridge::install() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  instance();
  auto sink = std::make_shared<QtLogSink>();
  sink->set_pattern("%H:%M:%S.%e %l %v");
  spdlog::default_logger()->sinks().push_back(sink);
}

}  // namespace kvscope::ui
