#include "ui/widgets/PlotExport.h"

#include <QFile>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QTextStream>
#include <qcustomplot.h>

namespace kvscope::ui {

bool exportPlot(QCustomPlot* plot, const QString& path) {
  if (path.endsWith(QStringLiteral(".pdf"), Qt::CaseInsensitive)) return plot->savePdf(path);
  return plot->savePng(path, 0, 0, 2.0);
}

void installPlotExport(QCustomPlot* plot, const QString& base_name, std::function<QString()> csv) {
  plot->setContextMenuPolicy(Qt::CustomContextMenu);
  QObject::connect(plot, &QWidget::customContextMenuRequested, plot, [plot, base_name, csv](const QPoint& at) {
    QMenu menu(plot);
    const auto save = [plot, base_name](const QString& suffix, const QString& filter) {
      const QString path = QFileDialog::getSaveFileName(plot, QObject::tr("Export"), base_name + suffix, filter);
      if (!path.isEmpty() && !exportPlot(plot, path)) {
        QMessageBox::warning(plot, QObject::tr("Export"), QObject::tr("Could not write %1").arg(path));
      }
    };
    menu.addAction(QObject::tr("Export PNG\u2026"), plot, [save] { save(QStringLiteral(".png"), QStringLiteral("PNG (*.png)")); });
    menu.addAction(QObject::tr("Export PDF\u2026"), plot, [save] { save(QStringLiteral(".pdf"), QStringLiteral("PDF (*.pdf)")); });
    if (csv) {
      menu.addAction(QObject::tr("Export CSV\u2026"), plot, [plot, base_name, csv] {
        const QString path = QFileDialog::getSaveFileName(plot, QObject::tr("Export CSV"), base_name + QStringLiteral(".csv"),
                                                          QStringLiteral("CSV (*.csv)"));
        if (path.isEmpty()) return;
        QFile file(path);
        if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
          QMessageBox::warning(plot, QObject::tr("Export"), QObject::tr("Could not write %1").arg(path));
          return;
        }
        QTextStream(&file) << csv();
      });
    }
    menu.exec(plot->mapToGlobal(at));
  });
}

}  // namespace kvscope::ui
