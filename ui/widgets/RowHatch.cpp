#include "ui/widgets/RowHatch.h"

#include <QPainter>
#include <QPixmap>

namespace kvscope::ui {

QBrush removedRowHatch() {
  QPixmap tile(8, 8);
  tile.fill(QColor(205, 205, 205));
  QPainter painter(&tile);
  painter.setPen(QPen(QColor(120, 120, 120), 1.5));
  painter.drawLine(0, 8, 8, 0);
  painter.drawLine(-4, 4, 4, -4);  // the neighbouring tiles' lines, so the pattern joins up
  painter.drawLine(4, 12, 12, 4);
  return QBrush(tile);
}

}  // namespace kvscope::ui
