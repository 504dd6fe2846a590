#include "ui/widgets/HeatmapParts.h"

#include <QLabel>

#include <qcustomplot.h>

#include "ui/widgets/HoverCellHighlight.h"

namespace kvscope::ui {

QLabel* makeCaption() {
  auto* caption = new QLabel;
  caption->setObjectName(QStringLiteral("caption"));
  caption->setWordWrap(true);
  caption->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return caption;
}

QString messageCaption(const QString& slot, const QString& label, const QString& why) {
  return QStringLiteral("<b>%1</b> %2").arg((slot + QLatin1Char(' ') + label).toHtmlEscaped(), why.toHtmlEscaped());
}

QCustomPlot* makeBarePlot(const QString& name) {
  auto* plot = new QCustomPlot;
  plot->setObjectName(name);
  plot->setMinimumSize(240, 200);
  new HoverCellHighlight(plot);
  plot->plotLayout()->clear();
  return plot;
}

QCPColorMap* addColorMap(QCPAxisRect* rect, QCPColorScale* scale, const QCPColorGradient& gradient) {
  auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
  map->setInterpolate(false);
  if (scale) map->setColorScale(scale);
  map->setGradient(gradient);  // after setColorScale, which adopts the scale's gradient
  return map;
}

std::vector<int64_t> transparentRows(const QCPColorMap* map) {
  std::vector<int64_t> rows;
  QCPColorMapData* data = map->data();  // alpha() is not const in QCustomPlot 2.1
  for (int r = 0; r < data->valueSize(); ++r) {
    if (data->keySize() > 0 && data->alpha(0, r) == 0) rows.push_back(r);
  }
  return rows;
}

}  // namespace kvscope::ui
