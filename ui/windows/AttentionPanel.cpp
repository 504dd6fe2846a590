#include "ui/windows/AttentionPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

AttentionPanel::AttentionPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  layer_box_ = new QComboBox;
  head_box_ = new QComboBox;
  info_ = new QLabel;
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("head")));
  header->addWidget(head_box_);
  header->addWidget(info_, 1);

  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("attentionPlot"));
  plot_->setMinimumSize(260, 100);
  plot_->yAxis->setRangeReversed(true);
  plot_->xAxis->setLabel(tr("key position"));
  auto positions = QSharedPointer<QCPAxisTickerFixed>::create();  // whole positions only
  positions->setTickStep(1);
  positions->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot_->xAxis->setTicker(positions);
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map_->setInterpolate(false);
  QCPColorGradient gradient(QCPColorGradient::gpHot);
  gradient.setNanHandling(QCPColorGradient::nhNanColor);
  gradient.setNanColor(QColor(170, 170, 170));
  auto* scale = new QCPColorScale(plot_);
  scale->setBarWidth(10);
  plot_->plotLayout()->addElement(0, 1, scale);
  map_->setColorScale(scale);
  map_->setGradient(gradient.inverted());  // after setColorScale, which adopts the scale's gradient
  installPlotExport(plot_, QStringLiteral("verify-attention"), [this] { return csv(); });
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &AttentionPanel::onMouseMove);
  connect(plot_, &QCustomPlot::mousePress, this, &AttentionPanel::onMousePress);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(header);
  layout->addWidget(plot_, 1);
  connect(layer_box_, &QComboBox::currentIndexChanged, this, [this] { scheduleRefresh(); });
  connect(head_box_, &QComboBox::currentIndexChanged, this, [this] { scheduleRefresh(); });
}

void AttentionPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  const Cursor& cursor = context().cursor();
  plot_->clearItems();
  plot_->clearGraphs();
  queries_ = keys_ = 0;
  shown_round_ = -1;
  const bool after_verify = cursor.round >= 1 && phaseOrder(cursor.phase) >= phaseOrder(Phase::Verify);
  const auto found = snapshot && after_verify ? snapshot->attention.find(cursor.round) : decltype(snapshot->attention.end()){};
  if (!snapshot || !after_verify || found == snapshot->attention.end() || found->second->layers.empty()) {
    map_->data()->clear();
    info_->setText(cursor.round >= 1 ? tr("round %1: no verify pass recorded at this phase").arg(cursor.round)
                                     : tr("the prefill has no verify pass; step a round"));
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  const AttentionData& attention = *found->second;
  const RoundRecord* round = snapshot->round(cursor.round);
  {
    const QSignalBlocker block_layers(layer_box_), block_heads(head_box_);
    if (layer_box_->count() != static_cast<int>(attention.layers.size())) {
      layer_box_->clear();
      for (size_t i = 0; i < attention.layers.size(); ++i) layer_box_->addItem(QString::number(i));
    }
    if (head_box_->count() != attention.heads) {
      head_box_->clear();
      for (int64_t i = 0; i < attention.heads; ++i) head_box_->addItem(QString::number(i));
    }
  }
  const int layer = std::max(0, layer_box_->currentIndex());
  const int head = std::max(0, head_box_->currentIndex());
  queries_ = static_cast<int>(attention.queries);
  keys_ = static_cast<int>(attention.keys);
  shown_round_ = cursor.round;

  QCPColorMapData* data = map_->data();
  data->setSize(keys_, queries_);
  data->setRange(QCPRange(0, std::max(keys_ - 1, 1)), QCPRange(0, std::max(queries_ - 1, 1)));
  double peak = 1e-6;
  for (int q = 0; q < queries_; ++q) {
    const int64_t query_position = attention.first_query_position + q;
    for (int k = 0; k < keys_; ++k) {
      const double w = attention.at(layer, head, q, k);
      data->setCell(k, q, k > query_position ? std::nan("") : w);  // causal mask
      if (k <= query_position) peak = std::max(peak, w);
    }
  }
  map_->setDataRange(QCPRange(0, peak));

  // The mask's edge: a staircase at key = query position + 0.5.
  for (int q = 0; q < queries_; ++q) {
    const double x = static_cast<double>(attention.first_query_position + q) + 0.5;
    auto* line = new QCPItemLine(plot_);
    line->start->setCoords(x, q - 0.5);
    line->end->setCoords(x, q + 0.5);
    line->setPen(QPen(Qt::black, 1.5));
    if (q + 1 < queries_) {
      auto* step = new QCPItemLine(plot_);
      step->start->setCoords(x, q + 0.5);
      step->end->setCoords(x + 1, q + 0.5);
      step->setPen(QPen(Qt::black, 1.5));
    }
  }

  // Row labels and marks: which query row scored which draft, and its verdict.
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const bool judged = round && round->next_token >= 0 && phaseOrder(cursor.phase) >= phaseOrder(Phase::Accept);
  for (int q = 0; q < queries_; ++q) {
    const int64_t drafts = round ? static_cast<int64_t>(round->drafts.size()) : 0;
    QString label;
    QColor color = Qt::transparent;
    if (q < drafts) {
      label = QStringLiteral("p%1 d='%2'").arg(q + 1).arg(displayToken(snapshot->tokenText(round->drafts[static_cast<size_t>(q)])));
      if (judged) color = q < round->accepted ? Palette::acceptedDraft() : Palette::rejected();
    } else {
      label = QStringLiteral("p%1 next").arg(q + 1);
      if (judged && round->accepted == drafts) color = Palette::bonus();
    }
    if (judged && q == round->accepted && q < drafts) label += QStringLiteral(" \u2717");
    if (judged && q < round->accepted) label += QStringLiteral(" \u2713");
    ticker->addTick(q, label);
    if (color != Qt::transparent) {
      auto* mark = new QCPItemRect(plot_);
      mark->topLeft->setCoords(-1.6, q - 0.5);
      mark->bottomRight->setCoords(-0.6, q + 0.5);
      mark->setPen(Qt::NoPen);
      mark->setBrush(color);
    }
    if (judged && q < drafts && q >= round->accepted) {  // rejected/discarded draft row: outlined
      auto* row = new QCPItemRect(plot_);
      row->topLeft->setCoords(-0.5, q - 0.5);
      row->bottomRight->setCoords(keys_ - 0.5, q + 0.5);
      row->setPen(QPen(Palette::pruned(), 1.5, Qt::DashLine));
      row->setBrush(Qt::NoBrush);
    }
  }
  if (cursor.position >= 0 && cursor.position < keys_) {
    auto* column = new QCPItemRect(plot_);
    column->topLeft->setCoords(cursor.position - 0.5, -0.5);
    column->bottomRight->setCoords(cursor.position + 0.5, queries_ - 0.5);
    column->setPen(QPen(Palette::selection(), 2));
    column->setBrush(Qt::NoBrush);
  }
  plot_->yAxis->setTicker(ticker);
  plot_->xAxis->setRange(-1.8, keys_ - 0.5);
  plot_->yAxis->setRange(-0.5, queries_ - 0.5);
  info_->setText(tr("round %1 verify: %2 queries (positions %3..%4) over %5 keys")
                     .arg(cursor.round)
                     .arg(queries_)
                     .arg(attention.first_query_position)
                     .arg(attention.first_query_position + queries_ - 1)
                     .arg(keys_));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString AttentionPanel::csv() const {
  QString out = QStringLiteral("query_row");
  for (int k = 0; k < keys_; ++k) out += QStringLiteral(",key%1").arg(k);
  out += QLatin1Char('\n');
  for (int q = 0; q < queries_; ++q) {
    out += QString::number(q + 1);
    for (int k = 0; k < keys_; ++k) {
      const double w = map_->data()->cell(k, q);
      out += QLatin1Char(',') + (std::isnan(w) ? QString() : QString::number(w, 'g', 7));
    }
    out += QLatin1Char('\n');
  }
  return out;
}

void AttentionPanel::onMouseMove(QMouseEvent* event) {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || queries_ == 0) return;
  const int k = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
  const int q = static_cast<int>(std::lround(plot_->yAxis->pixelToCoord(event->position().y())));
  if (k < 0 || k >= keys_ || q < 0 || q >= queries_) return;
  const double value = map_->data()->cell(k, q);
  // Keys from the round's start on are its drafts; earlier ones are the committed text.
  const RoundRecord* round = snapshot->round(shown_round_);
  int64_t token = -1;
  if (round && k >= round->start_length) {
    const size_t i = static_cast<size_t>(k - round->start_length);
    if (i < round->drafts.size()) token = round->drafts[i];
  } else if (k < static_cast<int>(snapshot->sequence.size())) {
    token = snapshot->sequence[static_cast<size_t>(k)];
  }
  plot_->setToolTip(std::isnan(value) ? tr("key %1: masked (after the query)").arg(k)
                                      : tr("query row %1 -> key %2 '%3': %4")
                                            .arg(q + 1)
                                            .arg(k)
                                            .arg(token >= 0 ? displayToken(snapshot->tokenText(token)) : QStringLiteral("?"))
                                            .arg(value, 0, 'f', 4));
}

void AttentionPanel::onMousePress(QMouseEvent* event) {
  const int k = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
  if (k >= 0 && k < keys_) emit positionRequested(k);
}

}  // namespace kvscope::ui
