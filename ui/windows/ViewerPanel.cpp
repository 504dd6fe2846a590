#include "ui/windows/ViewerPanel.h"

#include <QEvent>
#include <QLabel>

namespace kvscope::ui {

ViewerPanel::ViewerPanel(DebuggerContext& context, QWidget* parent) : QWidget(parent), context_(context) {
  refresh_timer_.setSingleShot(true);
  refresh_timer_.setInterval(0);
  connect(&refresh_timer_, &QTimer::timeout, this, [this] { refreshAndNote(); });
  context_.registerViewer(this);
  scheduleRefresh();  // once constructed: the first picture, or the note that there is nothing yet
}

ViewerPanel::~ViewerPanel() { context_.unregisterViewer(this); }

void ViewerPanel::scheduleRefresh() {
  if (!refresh_timer_.isActive()) refresh_timer_.start();
}

void ViewerPanel::flushRefresh() {
  refresh_timer_.stop();
  refreshAndNote();
}

void ViewerPanel::refreshAndNote() {
  refresh();
  updateEmptyNote();
}

void ViewerPanel::updateEmptyNote() {
  const bool empty = showsSession() && context_.snapshot() == nullptr;
  if (!empty) {
    if (empty_note_) empty_note_->hide();
    return;
  }
  if (!empty_note_) {
    empty_note_ = new QLabel(this);
    empty_note_->setObjectName(QStringLiteral("emptyNote"));
    empty_note_->setTextFormat(Qt::PlainText);
    empty_note_->setWordWrap(true);
    empty_note_->setAlignment(Qt::AlignCenter);
    empty_note_->setMargin(24);
    empty_note_->setAutoFillBackground(true);  // covers the empty axes behind it
    empty_note_->setText(tr("No session yet.\nLoad the models and start one in the Session panel, or open a "
                            "trace or a capture from the File menu."));
  }
  empty_note_->setGeometry(rect());
  empty_note_->raise();
  empty_note_->show();
}

bool ViewerPanel::event(QEvent* event) {
  if (event->type() == QEvent::Resize && empty_note_) empty_note_->setGeometry(rect());
  return QWidget::event(event);
}

}  // namespace kvscope::ui
