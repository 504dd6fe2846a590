#include "ui/windows/DiffPanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"

namespace kvscope::ui {

namespace {
constexpr double kFloor = 1e-9;  // log axes: exact zeros drawn at the floor

QCPGraph* pointsGraph(QCustomPlot* plot, const QColor& color, QCPScatterStyle::ScatterShape shape) {
  QCPGraph* graph = plot->addGraph();
  graph->setLineStyle(QCPGraph::lsNone);
  graph->setScatterStyle(QCPScatterStyle(shape, color, color, 7));
  return graph;
}
}  // namespace

DiffPanel::DiffPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  run_ = new QPushButton(tr("Run diff (cached vs uncached)"));
  run_->setObjectName(QStringLiteral("runDiff"));
  run_->setToolTip(tr("Restarts the session with the current settings (cache on, the chosen fault) and runs it to the end,\n"
                      "recomputing every draft and verify pass without a cache and comparing the logits."));
  audit_now_ = new QPushButton(tr("Audit now"));
  audit_now_->setObjectName(QStringLiteral("auditNow"));
  audit_now_->setToolTip(tr("Recompute K and V of the tokens each cache should hold and compare them with the cache,\n"
                            "per layer, head and position, as the session stands now."));
  go_ = new QPushButton(tr("Go to first bad cell"));
  go_->setObjectName(QStringLiteral("goToBadCell"));
  go_->setEnabled(false);
  summary_ = new QLabel(tr("no diff run yet"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* header = new QHBoxLayout;
  header->addWidget(run_);
  header->addWidget(audit_now_);
  header->addWidget(go_);
  header->addWidget(summary_, 1);

  positions_ = new QCustomPlot;
  positions_->setObjectName(QStringLiteral("diffPlot"));
  positions_->setMinimumHeight(100);
  positions_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  positions_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  positions_->yAxis->setLabel(tr("max |\u0394 logit|"));
  positions_->xAxis->setLabel(tr("query position (\u25cf target verify, \u25b2 drafter draft)"));
  auto whole = QSharedPointer<QCPAxisTickerFixed>::create();
  whole->setTickStep(1);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  positions_->xAxis->setTicker(whole);
  positions_->yAxis2->setVisible(true);
  positions_->yAxis2->setScaleType(QCPAxis::stLogarithmic);
  positions_->yAxis2->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  positions_->yAxis2->setLabel(tr("KL(p_uncached || p_cached)"));
  const QColor colors[3] = {Palette::acceptedDraft().darker(120), Palette::bonus().darker(120), Palette::pruned()};
  for (int v = 0; v < 3; ++v) {  // target verify queries: discs; drafter draft queries: triangles
    points_[0][v] = pointsGraph(positions_, colors[v], QCPScatterStyle::ssDisc);
    points_[1][v] = pointsGraph(positions_, colors[v], QCPScatterStyle::ssTriangle);
  }
  kl_ = positions_->addGraph(positions_->xAxis, positions_->yAxis2);
  kl_->setName(tr("KL"));
  kl_->setPen(QPen(QColor(90, 90, 200), 1, Qt::DashLine));
  installPlotExport(positions_, QStringLiteral("diff"));

  audit_ = new QCustomPlot;
  audit_->setObjectName(QStringLiteral("auditPlot"));
  audit_->setMinimumHeight(80);
  audit_->xAxis->setLabel(tr("position"));
  audit_->yAxis->setLabel(tr("layer"));
  audit_->yAxis->setRangeReversed(true);
  auto audit_positions = QSharedPointer<QCPAxisTickerFixed>::create();
  audit_positions->setTickStep(1);
  audit_positions->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  audit_->xAxis->setTicker(audit_positions);
  audit_map_ = new QCPColorMap(audit_->xAxis, audit_->yAxis);
  audit_map_->setInterpolate(false);
  auto* scale = new QCPColorScale(audit_);
  scale->setBarWidth(10);
  scale->setLabel(tr("log10 error"));
  audit_->plotLayout()->addElement(0, 1, scale);
  audit_map_->setColorScale(scale);
  QCPColorGradient gradient(QCPColorGradient::gpHot);
  gradient.setNanHandling(QCPColorGradient::nhNanColor);
  gradient.setNanColor(QColor(120, 0, 160));  // a missing or extra row
  audit_map_->setGradient(gradient.inverted());
  installPlotExport(audit_, QStringLiteral("audit"));

  auto* legend = new QLabel(QStringLiteral("<span style='color:%1'>●</span> agree &nbsp;"
                                           "<span style='color:%2'>●</span> float noise &nbsp;"
                                           "<span style='color:%3'>●</span> divergent &nbsp;"
                                           "<span style='color:#5a5ac8'>- - -</span> KL of the target (right axis) &nbsp;&nbsp; "
                                           "audit: log10 max |Δ| of K/V per layer and position, "
                                           "<span style='color:#7800a0'>■</span> missing or extra row")
                                .arg(Palette::acceptedDraft().darker(120).name(), Palette::bonus().darker(120).name(),
                                     Palette::pruned().name()));
  legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(positions_);
  splitter->addWidget(audit_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(header);
  layout->addWidget(legend);
  layout->addWidget(splitter, 1);

  connect(run_, &QPushButton::clicked, this, &DiffPanel::runDiffRequested);
  connect(audit_now_, &QPushButton::clicked, this, &DiffPanel::auditRequested);
  connect(go_, &QPushButton::clicked, this, [this] {
    const SessionSnapshot* snapshot = this->context().snapshot();
    if (!snapshot) return;
    if (const AuditData* audit = shownAudit(); audit && audit->has_bad_cell) {
      emit badCellRequested(audit->round, audit->bad_position, static_cast<int>(audit->cache),
                            static_cast<int>(audit->bad_layer), static_cast<int>(audit->bad_head));
    } else if (snapshot->diff && snapshot->diff->diverged) {
      const DiffData& diff = *snapshot->diff;
      emit badCellRequested(diff.divergence_round, diff.divergence_position, static_cast<int>(diff.divergence_cache), -1, -1);
    }
  });
}

const AuditData* DiffPanel::shownAudit() const {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot) return nullptr;
  if (snapshot->audit) return snapshot->audit.get();
  return snapshot->diff && snapshot->diff->audit ? snapshot->diff->audit.get() : nullptr;
}

int DiffPanel::pointCount() const {
  int count = 0;
  for (auto& cache : points_) {
    for (QCPGraph* graph : cache) count += graph->dataCount();
  }
  return count;
}

void DiffPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  const DiffData* diff = snapshot && snapshot->diff ? snapshot->diff.get() : nullptr;
  positions_->clearItems();
  audit_->clearItems();
  QVector<double> keys[2][3], values[2][3], kl_keys, kl_values;
  if (diff) {
    for (const DiffPoint& point : diff->points) {
      const int c = point.cache == CacheRole::Target ? 0 : 1;
      const int v = std::clamp(point.verdict, 0, 2);
      keys[c][v] << static_cast<double>(point.position);
      values[c][v] << std::max(point.max_abs_logit_diff, kFloor);
      if (c == 0) {
        kl_keys << static_cast<double>(point.position);
        kl_values << std::max(point.kl, kFloor);
      }
    }
  }
  for (int c = 0; c < 2; ++c) {
    for (int v = 0; v < 3; ++v) points_[c][v]->setData(keys[c][v], values[c][v]);
  }
  kl_->setData(kl_keys, kl_values);
  positions_->rescaleAxes();
  positions_->yAxis->setRangeLower(kFloor);
  positions_->yAxis2->setRangeLower(kFloor);
  if (positions_->yAxis->range().upper < 1) positions_->yAxis->setRangeUpper(1);
  if (positions_->yAxis2->range().upper < 1) positions_->yAxis2->setRangeUpper(1);
  positions_->xAxis->scaleRange(1.05);

  const Cursor& cursor = context().cursor();
  if (cursor.position >= 0) {
    auto* line = new QCPItemStraightLine(positions_);
    line->point1->setCoords(cursor.position, 1);
    line->point2->setCoords(cursor.position, 2);
    line->setPen(QPen(Palette::selection(), 1));
  }
  if (diff && diff->diverged) {
    auto* line = new QCPItemStraightLine(positions_);
    line->point1->setCoords(diff->divergence_position, 1);
    line->point2->setCoords(diff->divergence_position, 2);
    line->setPen(QPen(Palette::pruned(), 2, Qt::DashLine));
    auto* label = new QCPItemText(positions_);
    label->position->setType(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(0.99, 0.02);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
    label->setText(tr("first divergence: %1 cache, round %2, position %3")
                       .arg(diff->divergence_cache == CacheRole::Target ? tr("target") : tr("drafter"))
                       .arg(diff->divergence_round)
                       .arg(diff->divergence_position));
    label->setColor(Palette::pruned());
  }
  positions_->replot(QCustomPlot::rpQueuedReplot);

  // The audit: of the current state ("Audit now"), else at the divergence.
  const AuditData* audit = shownAudit();
  QCPColorMapData* data = audit_map_->data();
  const int layers = audit ? static_cast<int>(audit->error.size()) : 0;
  const int cols = layers > 0 ? static_cast<int>(audit->error.front().size()) : 0;
  if (layers > 0 && cols > 0) {
    data->setSize(cols, layers);
    data->setRange(QCPRange(0, std::max(cols - 1, 1)), QCPRange(0, std::max(layers - 1, 1)));
    double high = -9;
    for (int l = 0; l < layers; ++l) {
      for (int p = 0; p < cols && p < static_cast<int>(audit->error[l].size()); ++p) {
        const double e = audit->error[l][p];
        const double shown = std::isinf(e) ? std::nan("") : std::log10(std::max(e, kFloor));
        data->setCell(p, l, shown);
        if (!std::isnan(shown)) high = std::max(high, shown);
      }
    }
    audit_map_->setDataRange(QCPRange(std::log10(kFloor), std::max(high, -3.0)));
    if (audit->has_bad_cell) {
      auto* mark = new QCPItemRect(audit_);
      mark->topLeft->setCoords(audit->bad_position - 0.5, audit->bad_layer - 0.5);
      mark->bottomRight->setCoords(audit->bad_position + 0.5, audit->bad_layer + 0.5);
      mark->setPen(QPen(Palette::selection(), 2));
    }
    audit_->xAxis->setRange(-0.5, cols - 0.5);
    audit_->yAxis->setRange(-0.5, layers - 0.5);
    auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
    ticker->setTickStep(1);
    audit_->yAxis->setTicker(ticker);
  } else {
    data->clear();
  }
  audit_->replot(QCustomPlot::rpQueuedReplot);

  go_->setEnabled((audit && audit->has_bad_cell) || (diff && diff->diverged));
  audit_now_->setEnabled(snapshot && !snapshot->replay_only && snapshot->use_cache);
  QString text;
  if (diff) {
    text = tr("fault <b>%1</b>: %2 agree, %3 float noise, %4 divergent; max |\u0394 logit| %5")
               .arg(QString::fromStdString(diff->fault))
               .arg(diff->agree)
               .arg(diff->noise)
               .arg(diff->divergent)
               .arg(diff->max_abs_logit_diff, 0, 'g', 3);
    if (diff->diverged) {
      text += tr("<br><span style='color:#c00'>first divergence: %1 cache, round %2, position %3</span>")
                  .arg(diff->divergence_cache == CacheRole::Target ? tr("target") : tr("drafter"))
                  .arg(diff->divergence_round)
                  .arg(diff->divergence_position);
    } else {
      text += tr("<br>no divergence: the cache agrees with a fresh recomputation");
    }
  } else {
    text = snapshot ? tr("no diff for this session: Run diff restarts it with the current settings") : tr("no session");
  }
  if (audit) {
    text += tr("<br>audit of the %1 cache after round %2 %3: ")
                .arg(audit->cache == CacheRole::Target ? tr("target") : tr("drafter"))
                .arg(audit->round)
                .arg(QString::fromUtf8(phaseName(audit->after_phase)));
    text += audit->has_bad_cell
                ? tr("first bad cell layer %1, kv head %2, position %3 (%4, error %5); %6 bad cells")
                      .arg(audit->bad_layer)
                      .arg(audit->bad_head)
                      .arg(audit->bad_position)
                      .arg(QString::fromStdString(audit->bad_kind))
                      .arg(audit->bad_error, 0, 'g', 3)
                      .arg(audit->bad_cells)
                : tr("clean (max |\u0394| %1)").arg(audit->max_value_error, 0, 'g', 3);
  }
  summary_->setText(text);
}

}  // namespace kvscope::ui
