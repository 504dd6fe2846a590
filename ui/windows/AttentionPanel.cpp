#include "ui/windows/AttentionPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QTextDocument>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "core/cache/eviction_masks.h"

#include "ui/widgets/HoverCellHighlight.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PickerItems.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/RowLabel.h"
#include "ui/widgets/RoundName.h"
#include "ui/widgets/WrappedLegend.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {
constexpr double kStateStrip = 0.45;  // height of the verdict strip under the last query row

QCPItemLine* segment(QCustomPlot* plot, double x1, double y1, double x2, double y2, const QPen& pen) {
  auto* line = new QCPItemLine(plot);
  line->start->setCoords(x1, y1);
  line->end->setCoords(x2, y2);
  line->setPen(pen);
  return line;
}

QCPItemRect* box(QCustomPlot* plot, double left, double top, double right, double bottom, const QPen& pen,
                 const QBrush& brush) {
  auto* item = new QCPItemRect(plot);
  item->topLeft->setCoords(left, top);
  item->bottomRight->setCoords(right, bottom);
  item->setPen(pen);
  item->setBrush(brush);
  return item;
}
}  // namespace

AttentionPanel::AttentionPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  layer_box_ = new QComboBox;
  layer_box_->setObjectName(QStringLiteral("attentionLayer"));
  layer_box_->setToolTip(tr("layer (shared by every panel)"));
  head_box_ = new QComboBox;
  head_box_->setObjectName(QStringLiteral("attentionHead"));
  head_box_->setToolTip(tr("query head; its kv head is shared by every panel"));
  info_ = new QLabel;
  info_->setObjectName(QStringLiteral("attentionInfo"));
  info_->setTextFormat(Qt::RichText);  // its notes use entities and colour
  info_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("query head")));
  header->addWidget(head_box_);
  header->addWidget(info_, 1);

  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("attentionPlot"));
  new HoverCellHighlight(plot_);  // presenter's pointer on the cell under the mouse
  plot_->setMinimumSize(260, 70);
  plot_->yAxis->setRangeReversed(true);
  fitKeyAxisLabel();
  plot_->xAxis->setTickLabelRotation(60);
  plot_->xAxis->setTickLabelFont(QFont(font().family(), 7));
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
  // The rows' height is known once laid out (a resize, a zoom): thin the labels to it.
  connect(plot_, &QCustomPlot::afterLayout, this, &AttentionPanel::thinQueryLabels);
  connect(plot_, &QCustomPlot::afterLayout, this, &AttentionPanel::fitKeyAxisLabel);

  auto* legend = new WrappedLegend(tr("grey: masked by the model's mask &nbsp; <span style='color:%1'>&#9638;</span>&nbsp;evicted "
                               "(policy) &nbsp; hatched keys: ")
                                .arg(Palette::evicted().name()) +
                            Palette::rowStateLegend());
  legend->setObjectName(QStringLiteral("attentionLegend"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(header);
  layout->addWidget(plot_, 1);
  layout->addWidget(legend);
  connect(layer_box_, &QComboBox::currentIndexChanged, this, [this](int layer) {
    if (layer >= 0) this->context().setLayerHead(CacheRole::Target, layer, kv_head_);
  });
  connect(head_box_, &QComboBox::currentIndexChanged, this, [this](int head) {
    if (head >= 0) setQueryHead(head);
  });
}

void AttentionPanel::setQueryHead(int head) {
  // From the snapshot, not the last drawing: this may run before the first refresh (a trace's GUI state).
  const SessionSnapshot* snapshot = context().snapshot();
  if (snapshot && snapshot->target.heads > 0 && snapshot->target.kv_heads > 0) {
    group_ = static_cast<int>(std::max<int64_t>(1, snapshot->target.heads / snapshot->target.kv_heads));
  }
  query_head_ = std::max(0, head);
  context().setLayerHead(CacheRole::Target, context().cursor().layer, query_head_ / std::max(group_, 1));
  scheduleRefresh();
}

double AttentionPanel::cell(int query, int key) const {
  if (query < 0 || query >= queries_ || key < 0 || key >= keyCount()) return std::nan("");
  return map_->data()->cell(key, query);
}

bool AttentionPanel::showEmpty(const SessionSnapshot* snapshot, const Cursor& cursor) {
  const bool after_verify = cursor.round >= 1 && phaseOrder(cursor.phase) >= phaseOrder(Phase::Verify);
  const auto found = snapshot && after_verify ? snapshot->attention.find(cursor.round) : decltype(snapshot->attention.end()){};
  if (snapshot && after_verify && found != snapshot->attention.end() && found->second &&
      !found->second->layers.empty()) {
    map_->setVisible(true);
    return false;
  }
  // Nothing to draw: no map (a cleared one paints one flat colour that reads
  // as data), no row or key labels; the line above says why.
  map_->data()->clear();
  map_->setVisible(false);
  query_labels_.clear();
  label_step_ = 0;
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
  plot_->xAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
  const bool dropped = snapshot && after_verify && found != snapshot->attention.end() && found->second &&
                       found->second->attention_dropped;
  info_forms_.clear();
  info_->setToolTip(QString());
  if (dropped) {
    info_->setText(tr("round %1: its attention was recorded, then dropped to keep the session within its trace "
                      "budget (the newest rounds are kept; raise --trace-budget)")
                       .arg(cursor.round));
  } else {
    info_->setText(cursor.round >= 1 ? tr("round %1: no verify pass recorded at this phase").arg(cursor.round)
                                     : tr("the prefill has no verify pass; step a round"));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
  return true;
}

void AttentionPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  const Cursor& cursor = context().cursor();
  plot_->clearItems();
  queries_ = 0;
  keys_.clear();
  shown_round_ = -1;
  if (showEmpty(snapshot, cursor)) return;
  const AttentionData& attention = *snapshot->attention.at(cursor.round);
  updateSelectors(attention, cursor);
  queries_ = static_cast<int>(attention.queries);
  shown_round_ = cursor.round;
  first_query_position_ = attention.first_query_position;
  collectKeys(*snapshot, attention, cursor.round);
  fillMap(attention);
  drawMaskEdge(attention);
  drawKeyMarks(cursor);
  drawQueryMarks(*snapshot, cursor);
  drawKeyLabels();
  describe(attention, cursor.round);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void AttentionPanel::updateSelectors(const AttentionData& attention, const Cursor& cursor) {
  const SessionSnapshot& snapshot = *context().snapshot();
  const int layers = static_cast<int>(attention.layerCount());
  const int heads = static_cast<int>(attention.heads);
  const int kv_heads = static_cast<int>(std::max<int64_t>(snapshot.target.kv_heads, 1));
  group_ = std::max(1, heads / kv_heads);
  layer_ = static_cast<int>(std::clamp<int64_t>(cursor.layer, 0, std::max(layers - 1, 0)));
  kv_head_ = static_cast<int>(std::clamp<int64_t>(cursor.head, 0, kv_heads - 1));
  query_head_ = queryHeadInGroup(query_head_, kv_head_, group_, heads);
  const QSignalBlocker block_layers(layer_box_), block_heads(head_box_);
  syncPickerItems(layer_box_, layers);
  syncPickerItems(head_box_, heads, [this](int i) { return tr("%1 (kv %2)").arg(i).arg(i / group_); });
  layer_box_->setCurrentIndex(layer_);
  head_box_->setCurrentIndex(query_head_);
}

void AttentionPanel::collectKeys(const SessionSnapshot& snapshot, const AttentionData& attention, int64_t round) {
  // The keys are the physical rows at the verify moment; their verdicts too.
  std::vector<ViewRow> rows = viewRows(snapshot, CacheRole::Target, layer_, {round, Phase::Verify});
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const ViewRow& r) { return r.physical_row < 0; }), rows.end());
  const EvictionMasks masks = masksAt(snapshot.events, CacheRole::Target, {round, Phase::Verify});
  const int64_t count = attention.keyCount(layer_);
  for (int64_t k = 0; k < count; ++k) {
    AttentionKey key;
    key.row = k;
    if (k < static_cast<int64_t>(rows.size())) {
      const ViewRow& row = rows[static_cast<size_t>(k)];
      const LedgerEntry& entry = snapshot.entries[static_cast<size_t>(row.entry)];
      key.entry = row.entry;
      key.position = entry.position;
      key.rope_position = entry.rope_position;
      key.token = entry.token;
      key.state = row.state;
      if (!masks.empty()) key.masked_by = masks.maskedBy(row.entry, layer_, kv_head_);
    }
    key.label = rowLabel(snapshot, k, key.entry, 6);
    keys_.push_back(key);
  }
}

void AttentionPanel::fillMap(const AttentionData& attention) {
  const int keys = keyCount();
  has_mask_ = layer_ < static_cast<int>(attention.masks.size()) && !attention.masks[static_cast<size_t>(layer_)].empty();
  QCPColorMapData* data = map_->data();
  data->setSize(std::max(keys, 1), std::max(queries_, 1));
  data->setRange(QCPRange(0, std::max(keys - 1, 1)), QCPRange(0, std::max(queries_ - 1, 1)));
  double peak = 1e-6;
  for (int q = 0; q < queries_; ++q) {
    for (int k = 0; k < keys; ++k) {
      const bool visible = !has_mask_ || attention.visible(layer_, q, k);
      const double w = attention.at(layer_, query_head_, q, k);
      data->setCell(k, q, visible ? w : std::nan(""));
      if (visible) peak = std::max(peak, w);
    }
  }
  map_->setDataRange(QCPRange(0, peak));
}

void AttentionPanel::drawMaskEdge(const AttentionData& attention) {
  if (!has_mask_) return;
  const int keys = keyCount();
  const auto visible = [&](int q, int k) { return attention.visible(layer_, q, k); };
  // The outline as runs: one segment per stretch of a cell boundary the mask
  // changes across. A causal mask gives about queries + keys of them; a mask
  // from a file may be a checkerboard (queries x keys), which the grey cells
  // already show: its outline is not drawn, so a hostile trace cannot make
  // the panel build millions of plot items.
  struct Run { double x1, y1, x2, y2; };
  std::vector<Run> runs;
  const size_t cap = static_cast<size_t>(4 * (queries_ + keys) + 16);
  for (int k = 0; k + 1 < keys && runs.size() <= cap; ++k) {  // vertical boundaries x = k + 0.5
    for (int q = 0; q < queries_ && runs.size() <= cap;) {
      if (visible(q, k) == visible(q, k + 1)) { ++q; continue; }
      const int start = q;
      while (q < queries_ && visible(q, k) != visible(q, k + 1)) ++q;
      runs.push_back({k + 0.5, start - 0.5, k + 0.5, q - 0.5});
    }
  }
  for (int q = 0; q + 1 < queries_ && runs.size() <= cap; ++q) {  // horizontal boundaries y = q + 0.5
    for (int k = 0; k < keys && runs.size() <= cap;) {
      if (visible(q, k) == visible(q + 1, k)) { ++k; continue; }
      const int start = k;
      while (k < keys && visible(q, k) != visible(q + 1, k)) ++k;
      runs.push_back({start - 0.5, q + 0.5, k - 0.5, q + 0.5});
    }
  }
  mask_outlined_ = runs.size() <= cap;
  if (!mask_outlined_) return;
  const QPen pen(Qt::black, 1.5);
  for (const Run& r : runs) segment(plot_, r.x1, r.y1, r.x2, r.y2, pen);
}

void AttentionPanel::drawKeyMarks(const Cursor& cursor) {
  for (int k = 0; k < keyCount(); ++k) {
    const AttentionKey& key = keys_[k];
    if (key.masked_by >= 0) {  // evicted by a policy: held, not read (as the KV view draws it)
      const QColor grey = Palette::evicted();
      box(plot_, k - 0.5, -0.5, k + 0.5, queries_ - 0.5, QPen(grey, 1), QBrush(grey, Qt::DiagCrossPattern));
      box(plot_, k - 0.5, queries_ - 0.5, k + 0.5, queries_ - 0.5 + kStateStrip, Qt::NoPen, grey);
    }
    if (key.state != RowState::Ok) {  // a key the bookkeeping says should not be there (or not here)
      const QColor color = Palette::rowState(key.state);
      box(plot_, k - 0.5, -0.5, k + 0.5, queries_ - 0.5, QPen(color, 1.5), QBrush(color, Qt::BDiagPattern));
      box(plot_, k - 0.5, queries_ - 0.5, k + 0.5, queries_ - 0.5 + kStateStrip, Qt::NoPen, color);
    }
    const bool selected = cursor.cache == CacheRole::Target
                              ? key.entry >= 0 && key.entry == cursor.entry
                              : key.position == cursor.position && key.entry >= 0;
    if (selected) {
      box(plot_, k - 0.5, -0.5, k + 0.5, queries_ - 0.5 + kStateStrip, QPen(Palette::selection(), 2), Qt::NoBrush);
    }
  }
}

void AttentionPanel::drawQueryMarks(const SessionSnapshot& snapshot, const Cursor& cursor) {
  // Row labels and marks: which query row scored which draft, and its verdict.
  const RoundRecord* round = snapshot.round(cursor.round);
  query_labels_.clear();
  must_name_ = -1;
  const bool judged = round && round->next_token >= 0 && phaseOrder(cursor.phase) >= phaseOrder(Phase::Accept);
  const int64_t drafts = round ? static_cast<int64_t>(round->drafts.size()) : 0;
  for (int q = 0; q < queries_; ++q) {
    QString label;
    QColor color = Qt::transparent;
    if (q < drafts) {
      label = QStringLiteral("p%1 d='%2'").arg(q + 1).arg(displayToken(snapshot.tokenText(round->drafts[static_cast<size_t>(q)])));
      if (judged) color = q < round->accepted ? Palette::acceptedDraft() : Palette::rejected();
    } else {
      label = QStringLiteral("p%1 next").arg(q + 1);
      if (judged && round->accepted == drafts) color = Palette::bonus();
    }
    if (judged && q == round->accepted && q < drafts) {
      label += QStringLiteral(" \u2717");
      must_name_ = q;
    }
    if (judged && q < round->accepted) label += QStringLiteral(" \u2713");
    query_labels_ << label;
    if (color != Qt::transparent) box(plot_, -1.6, q - 0.5, -0.6, q + 0.5, Qt::NoPen, color);
    if (judged && q < drafts && q >= round->accepted) {  // rejected/discarded draft row: outlined
      box(plot_, -0.5, q - 0.5, keyCount() - 0.5, q + 0.5, QPen(Palette::pruned(), 1.5, Qt::DashLine), Qt::NoBrush);
    }
  }
  plot_->yAxis->setRange(-0.5, queries_ - 0.5 + kStateStrip);
  label_step_ = 0;
  thinQueryLabels();
}

void AttentionPanel::fitKeyAxisLabel() {
  const QStringList labels = {
      tr("key: target cache row as the model saw it (position 'token'; r:p when row \u2260 position)"),
      tr("key: cache row as the model saw it (r:p when row \u2260 position)"),
      tr("key: cache row (position 'token')"),
      tr("key row"),
  };
  const QFontMetrics metrics(plot_->xAxis->labelFont());
  // Centred under the axis rect, the title must stay on the widget on both sides.
  const int centre = plot_->axisRect()->rect().center().x();
  const int room = 2 * std::min(centre, plot_->width() - centre) - 8;
  QString chosen = labels.back();
  for (const QString& label : labels) {
    if (metrics.horizontalAdvance(label) <= room) {
      chosen = label;
      break;
    }
  }
  if (plot_->xAxis->label() == chosen) return;
  plot_->xAxis->setLabel(chosen);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void AttentionPanel::thinQueryLabels() {
  const int rows_px = plot_->axisRect()->rect().height();
  const double row_px = rows_px > 0 ? rows_px / (queries_ + kStateStrip) : 1.0;
  const int label_px = QFontMetrics(plot_->yAxis->tickLabelFont()).height();
  // A pixel between labels, so two never touch.
  const int step = std::max(1, static_cast<int>(std::ceil((label_px + 1) / std::max(row_px, 1e-3))));
  if (step == label_step_) return;
  label_step_ = step;
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int q = 0; q < query_labels_.size(); ++q) {
    const bool near_must = must_name_ >= 0 && q != must_name_ && std::abs(q - must_name_) < step;
    if (q == must_name_ || (q % step == 0 && !near_must)) ticker->addTick(q, query_labels_[q]);
  }
  plot_->yAxis->setTicker(ticker);
  // Laid out already: the new ticks are drawn by the next replot.
  if (rows_px > 0) plot_->replot(QCustomPlot::rpQueuedReplot);
}

QList<QRect> AttentionPanel::queryLabelRects() const {
  QList<QRect> rects;
  const QFontMetrics metrics(plot_->yAxis->tickLabelFont());
  const QVector<double> ticks = plot_->yAxis->tickVector();
  const QVector<QString> labels = plot_->yAxis->tickVectorLabels();
  const int right = plot_->axisRect()->left() - plot_->yAxis->tickLabelPadding();
  for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
    const int y = static_cast<int>(std::lround(plot_->yAxis->coordToPixel(ticks[i])));
    const int width = metrics.horizontalAdvance(labels[i]);
    rects << QRect(right - width, y - metrics.height() / 2, width, metrics.height());
  }
  return rects;
}

void AttentionPanel::drawKeyLabels() {
  // Thinned out to fit the width, but a wrong or selected key is always named.
  // Labels are rotated (60 degrees): two neighbours keep clear of each other
  // when their spacing times sin(60) exceeds a line's height, in the font the
  // axis draws them in (presenter zoom scales it).
  const int width = std::max(plot_->axisRect()->width(), 200);
  const double key_px = static_cast<double>(width) / std::max(keyCount() + 1.3, 1.0);
  const double line_px = QFontMetrics(plot_->xAxis->tickLabelFont()).height() + 1;
  const int step = std::max(1, static_cast<int>(std::ceil(line_px / (0.866 * std::max(key_px, 1e-3)))));
  const Cursor& cursor = context().cursor();
  std::vector<bool> must(static_cast<size_t>(keyCount()), false);
  for (int k = 0; k < keyCount(); ++k) {
    const AttentionKey& key = keys_[k];
    must[static_cast<size_t>(k)] = key.state != RowState::Ok || (key.entry >= 0 && key.entry == cursor.entry);
  }
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  int last_named = -step;
  for (int k = 0; k < keyCount(); ++k) {
    // A regular label gives way to a must-name key less than a step ahead.
    bool must_ahead = false;
    for (int j = k + 1; j < std::min(keyCount(), k + step); ++j) must_ahead = must_ahead || must[static_cast<size_t>(j)];
    const bool regular = (k % step == 0 || k == keyCount() - 1) && !must_ahead && k - last_named >= step;
    if (must[static_cast<size_t>(k)] || regular) {
      ticker->addTick(k, keys_[k].label);
      last_named = k;
    }
  }
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setRange(-1.8, keyCount() - 0.5);
}

void AttentionPanel::describe(const AttentionData& attention, int64_t round) {
  int wrong = 0;
  for (const AttentionKey& key : keys_) wrong += key.state != RowState::Ok ? 1 : 0;
  QString text = tr("%1 verify, layer %2, query head %3 (kv %4): %5 queries (positions %6..%7) over %8 cache rows")
                     .arg(roundName(context().snapshot(), round))
                     .arg(layer_)
                     .arg(query_head_)
                     .arg(kv_head_)
                     .arg(queries_)
                     .arg(attention.first_query_position)
                     .arg(attention.first_query_position + queries_ - 1)
                     .arg(keyCount());
  if (wrong > 0) text += tr(" &middot; <span style='color:#c00'><b>%1 wrong rows</b></span>").arg(wrong);
  if (!has_mask_) text += tr(" &middot; no mask recorded");
  if (has_mask_ && !mask_outlined_) text += tr(" &middot; mask too irregular to outline (grey cells are masked)");
  // The same facts shorter, for a header too narrow for the sentence (it was cut at "(pos").
  const QString wrong_note = wrong > 0 ? tr(" \u00b7 <span style='color:#c00'><b>%1 wrong</b></span>").arg(wrong) : QString();
  info_forms_ = {text,
                 tr("%1 verify \u00b7 layer %2, head %3 (kv %4) \u00b7 queries %5..%6 \u00b7 %7 rows")
                         .arg(roundName(context().snapshot(), round))
                         .arg(layer_)
                         .arg(query_head_)
                         .arg(kv_head_)
                         .arg(attention.first_query_position)
                         .arg(attention.first_query_position + queries_ - 1)
                         .arg(keyCount()) +
                     wrong_note,
                 tr("%1 \u00b7 %2 rows").arg(roundName(context().snapshot(), round)).arg(keyCount()) + wrong_note};
  fitInfo();
}

void AttentionPanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  fitInfo();
}

void AttentionPanel::fitInfo() {
  if (info_forms_.isEmpty()) return;
  QString chosen = info_forms_.back();
  for (const QString& form : info_forms_) {
    QTextDocument line;
    line.setDefaultFont(info_->font());
    line.setDocumentMargin(0);
    line.setHtml(form);
    if (line.idealWidth() <= info_->width()) {
      chosen = form;
      break;
    }
  }
  info_->setText(chosen);
  info_->setToolTip(chosen == info_forms_.front() ? QString() : info_forms_.front());
}

QString AttentionPanel::csv() const {
  QString out = QStringLiteral("query_row");
  for (const AttentionKey& key : keys_) out += QStringLiteral(",row%1_pos%2").arg(key.row).arg(key.position);
  out += QLatin1Char('\n');
  for (int q = 0; q < queries_; ++q) {
    out += QString::number(q + 1);
    for (int k = 0; k < keyCount(); ++k) {
      const double w = cell(q, k);
      out += QLatin1Char(',') + (std::isnan(w) ? QString() : QString::number(w, 'g', 7));
    }
    out += QLatin1Char('\n');
  }
  return out;
}

int AttentionPanel::keyAt(double x) const {
  const int k = static_cast<int>(std::lround(x));
  return k >= 0 && k < keyCount() ? k : -1;
}

void AttentionPanel::onMouseMove(QMouseEvent* event) {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || queries_ == 0) return;
  const int k = keyAt(plot_->xAxis->pixelToCoord(event->position().x()));
  const int q = static_cast<int>(std::lround(plot_->yAxis->pixelToCoord(event->position().y())));
  if (k < 0 || q < 0 || q >= queries_) return;
  const AttentionKey& key = keys_[k];
  const double value = cell(q, k);
  QString text = tr("query %1 (position %2) \u2192 row %3: '%4' written for position %5 (rotary %6)")
                     .arg(q + 1)
                     .arg(first_query_position_ + q)
                     .arg(key.row)
                     .arg(key.token >= 0 ? displayToken(snapshot->tokenText(key.token)) : QStringLiteral("?"))
                     .arg(key.position)
                     .arg(key.rope_position);
  if (key.state != RowState::Ok) text += tr(" \u00b7 %1").arg(QString::fromUtf8(rowStateName(key.state)).toUpper());
  const auto& events = snapshot->events.events();
  if (key.masked_by >= 0 && key.masked_by < static_cast<int64_t>(events.size())) {
    const CacheEvent& eviction = events[static_cast<size_t>(key.masked_by)];
    text += tr(" \u00b7 EVICTED in kv head %1 by policy %2 at round %3: held, not read")
                .arg(kv_head_)
                .arg(QString::fromStdString(eviction.policy))
                .arg(eviction.round);
  }
  text += std::isnan(value) ? tr(" \u00b7 masked") : tr(" \u00b7 weight %1").arg(value, 0, 'f', 4);
  plot_->setToolTip(text);
}

void AttentionPanel::onMousePress(QMouseEvent* event) {
  const int k = keyAt(plot_->xAxis->pixelToCoord(event->position().x()));
  if (k >= 0 && keys_[k].entry >= 0) context().selectEntry(keys_[k].entry);
}

}  // namespace kvscope::ui
