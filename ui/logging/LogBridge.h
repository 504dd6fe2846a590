#pragma once
// Carries spdlog messages from any thread to the GUI thread: the QtLogSink
// calls post() wherever spdlog logs; listeners get a queued signal.
#include <QObject>
#include <QString>

namespace kvscope::ui {

class LogBridge : public QObject {
  Q_OBJECT
 public:
  static LogBridge* instance();
  // Installs a QtLogSink on spdlog's default logger (once).
  static void install();
  void post(int level, const QString& text) { emit message(level, text); }

 signals:
  void message(int level, const QString& text);  // level: spdlog::level::level_enum
};

}  // namespace kvscope::ui
