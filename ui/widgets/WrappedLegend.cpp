#include "ui/widgets/WrappedLegend.h"

#include <QResizeEvent>

#include <algorithm>

namespace kvscope::ui {

WrappedLegend::WrappedLegend(const QString& html, QWidget* parent) : QLabel(html, parent) {
  setWordWrap(true);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
}

void WrappedLegend::setLegend(const QString& html) {
  if (html == text()) return;
  setText(html);
  if (width() > 0) fitHeight(width());
}

void WrappedLegend::resizeEvent(QResizeEvent* event) {
  QLabel::resizeEvent(event);
  // Only a new width changes the lines; the height follows it once.
  if (event->size().width() == event->oldSize().width()) return;
  fitHeight(event->size().width());
}

void WrappedLegend::changeEvent(QEvent* event) {
  QLabel::changeEvent(event);
  if (event->type() == QEvent::FontChange && width() > 0) fitHeight(width());
}

void WrappedLegend::fitHeight(int width) {
  // An empty legend has no height for any width (QLabel answers -1).
  setFixedHeight(std::max(0, heightForWidth(width)));
}

}  // namespace kvscope::ui
