#pragma once
// Everything spdlog logs (core and GUI, any thread), newest at the bottom.
#include <QWidget>

class QPlainTextEdit;

namespace kvscope::ui {

class LogPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LogPanel(QWidget* parent = nullptr);
  QPlainTextEdit* text() const { return text_; }

 private:
  void append(int level, const QString& message);
  QPlainTextEdit* text_;
};

}  // namespace kvscope::ui
