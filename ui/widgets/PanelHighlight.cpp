#include "ui/widgets/PanelHighlight.h"

#include <QEvent>
#include <QPainter>

namespace kvscope::ui {

PanelHighlight::PanelHighlight(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("panelHighlight"));
  setAttribute(Qt::WA_TransparentForMouseEvents);
  setAttribute(Qt::WA_NoSystemBackground);
  hide();
}

void PanelHighlight::outline(QWidget* target) {
  if (target_) target_->removeEventFilter(this);
  target_ = target;
  if (!target) {
    hide();
    return;
  }
  setParent(target);
  target->installEventFilter(this);
  setGeometry(target->rect());
  show();
  raise();
}

bool PanelHighlight::eventFilter(QObject* watched, QEvent* event) {
  if (watched == target_ && (event->type() == QEvent::Resize || event->type() == QEvent::ChildAdded)) {
    setGeometry(target_->rect());
    raise();
  }
  return QWidget::eventFilter(watched, event);
}

void PanelHighlight::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  const int width = std::max(3, fontMetrics().height() / 4);
  painter.setPen(QPen(QColor(255, 140, 0, 160), width));  // translucent: the panel edge reads through
  painter.setBrush(Qt::NoBrush);
  painter.drawRect(rect().adjusted(width / 2, width / 2, -(width + 1) / 2, -(width + 1) / 2));
}

}  // namespace kvscope::ui
