#include "ui/windows/LogPanel.h"

#include <QPlainTextEdit>
#include <QVBoxLayout>

#include <spdlog/common.h>

#include "ui/logging/LogBridge.h"

namespace kvscope::ui {

LogPanel::LogPanel(QWidget* parent) : QWidget(parent) {
  text_ = new QPlainTextEdit;
  text_->setObjectName(QStringLiteral("logText"));
  text_->setReadOnly(true);
  text_->setMaximumBlockCount(5000);
  text_->setFont(QFont(QStringLiteral("monospace"), 8));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(text_);
  connect(LogBridge::instance(), &LogBridge::message, this, &LogPanel::append, Qt::QueuedConnection);
}

void LogPanel::append(int level, const QString& message) {
  QString color = QStringLiteral("#222");
  if (level >= spdlog::level::err) color = QStringLiteral("#c00");
  else if (level == spdlog::level::warn) color = QStringLiteral("#a60");
  else if (level <= spdlog::level::debug) color = QStringLiteral("#777");
  text_->appendHtml(QStringLiteral("<span style='color:%1'>%2</span>").arg(color, message.toHtmlEscaped()));
}

}  // namespace kvscope::ui
