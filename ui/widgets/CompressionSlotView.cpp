#include "ui/widgets/CompressionSlotView.h"

#include <QFontMetrics>
#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include <qcustomplot.h>

#include "ui/widgets/HeatmapParts.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/RowHatch.h"

namespace kvscope::ui {

namespace {

constexpr unsigned char kRemovedScoreAlpha = 70;  // a removed row's score shows faintly through the hatch

bool removed(RowFate fate) { return fate == RowFate::Evicted || fate == RowFate::EvictedDecoding; }

// The q-th quantile of v (sorted copy): a colour range that one huge score
// (an attention sink) does not wash out.
double quantile(std::vector<float> v, double q) {
  if (v.empty()) return 0.0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Width of a (multi-line) label in `font`.
int labelWidth(const QFont& font, const QString& text) {
  const QFontMetrics metrics(font);
  int width = 0;
  for (const QString& line : text.split(QLatin1Char('\n'))) width = std::max(width, metrics.horizontalAdvance(line));
  return width;
}

}  // namespace

CompressionSlotView::CompressionSlotView(const QString& slot, QWidget* parent) : QWidget(parent), slot_(slot) {
  setObjectName(QStringLiteral("compressionSlot") + slot);
  caption_ = makeCaption();

  plot_ = makeBarePlot(QStringLiteral("compressionMask") + slot);
  scores_rect_ = new QCPAxisRect(plot_);
  entries_rect_ = new QCPAxisRect(plot_);
  entries_scale_ = new QCPColorScale(plot_);
  // Inner sizes that keep cells visible between the axes (the layout test's 40 px).
  scores_rect_->setMinimumSize(44, 60);
  entries_rect_->setMinimumSize(64, 60);
  plot_->plotLayout()->addElement(0, 0, scores_rect_);
  plot_->plotLayout()->addElement(0, 1, entries_rect_);
  plot_->plotLayout()->addElement(0, 2, entries_scale_);
  plot_->plotLayout()->setColumnStretchFactors({1.0, 3.2, 0.1});
  // The scores get no colour scale: they have no common unit across
  // policies; the axis label says which way is high, the hover gives values.
  entries_scale_->setBarWidth(8);
  // Rows line up across the three columns.
  auto* rows = new QCPMarginGroup(plot_);
  scores_rect_->setMarginGroup(QCP::msTop | QCP::msBottom, rows);
  entries_rect_->setMarginGroup(QCP::msTop | QCP::msBottom, rows);
  entries_scale_->setMarginGroup(QCP::msTop | QCP::msBottom, rows);

  for (QCPAxisRect* rect : {scores_rect_, entries_rect_}) {
    rect->setupFullAxesBox(false);
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // position 0 on top, as in the KV view
    rect->setBackground(removedRowHatch());
  }
  scores_rect_->axis(QCPAxis::atLeft)->setLabel(tr("prefill position"));
  scores_rect_->axis(QCPAxis::atBottom)->setLabel(tr("score"));
  scores_rect_->axis(QCPAxis::atBottom)->setTicker(QSharedPointer<QCPAxisTickerFixed>::create());
  scores_rect_->axis(QCPAxis::atBottom)->ticker().staticCast<QCPAxisTickerFixed>()->setTickStep(1.0);
  entries_rect_->axis(QCPAxis::atLeft)->setTickLabels(false);
  entries_rect_->axis(QCPAxis::atBottom)->ticker()->setTickCount(4);  // readable when narrow or zoomed

  QCPColorGradient scores_gradient(QCPColorGradient::gpHot);
  scores_map_ = addColorMap(scores_rect_, nullptr, scores_gradient.inverted());  // high score: dark
  QCPColorGradient entries_gradient(QCPColorGradient::gpPolar);  // the KV view's colours
  entries_gradient.setNanHandling(QCPColorGradient::nhNanColor);
  entries_gradient.setNanColor(Qt::white);  // zeroed by element pruning
  entries_map_ = addColorMap(entries_rect_, entries_scale_, entries_gradient);

  head_outline_ = new QCPItemRect(plot_);
  head_outline_->setClipAxisRect(scores_rect_);
  for (QCPItemPosition* corner : {head_outline_->topLeft, head_outline_->bottomRight}) {
    corner->setAxes(scores_rect_->axis(QCPAxis::atBottom), scores_rect_->axis(QCPAxis::atLeft));
  }
  head_outline_->setPen(QPen(QColor(255, 170, 0), 3));  // the app's selection colour
  head_outline_->setBrush(Qt::NoBrush);
  head_outline_->setVisible(false);

  // With nothing to draw, empty hatched axes would read as data (every row
  // removed): the axes go bare and the plot says in words what Run will show.
  placeholder_ = new QCPItemText(plot_);
  placeholder_->setObjectName(QStringLiteral("compressionPlaceholder") + slot);
  placeholder_->position->setType(QCPItemPosition::ptViewportRatio);
  placeholder_->position->setCoords(0.5, 0.45);
  placeholder_->setPositionAlignment(Qt::AlignCenter);
  placeholder_->setTextAlignment(Qt::AlignCenter);
  placeholder_->setClipToAxisRect(false);
  placeholder_->setColor(QColor(90, 90, 90));
  placeholder_->setPadding(QMargins(6, 4, 6, 4));
  placeholder_->setBrush(QColor(255, 255, 255, 230));

  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &CompressionSlotView::onHover);
  connect(plot_, &QCustomPlot::afterLayout, this, &CompressionSlotView::fitLabels);
  installPlotExport(plot_, QStringLiteral("compression-") + slot);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(caption_);
  layout->addWidget(plot_, 1);
  showMessage(QString(), tr("not run yet"));
}

QString CompressionSlotView::caption() const { return caption_->text(); }

void CompressionSlotView::clearMaps() {
  scores_map_->data()->clear();
  entries_map_->data()->clear();
  head_outline_->setVisible(false);
}

void CompressionSlotView::showMessage(const QString& label, const QString& why) {
  summary_.reset();
  clearMaps();
  caption_->setText(messageCaption(slot_, label, why));
  showPlaceholder(true);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CompressionSlotView::showPlaceholder(bool shown) {
  placeholder_->setText(tr("Run to see slot %1:\nthe layer's scores and the kv head's %2\nwith the removed rows hatched")
                            .arg(slot_, values_ ? QStringLiteral("V") : QStringLiteral("K")));
  placeholder_->setVisible(shown);
  for (QCPAxisRect* rect : {scores_rect_, entries_rect_}) rect->setBackground(shown ? QBrush(Qt::NoBrush) : removedRowHatch());
  entries_scale_->setVisible(!shown);  // a colour scale of no values reads as data
}

QString CompressionSlotView::placeholderText() const { return placeholder_->visible() ? placeholder_->text() : QString(); }

void CompressionSlotView::showSlot(std::shared_ptr<const CompressionSummary> summary, const QString& label,
                                   int64_t layer, int64_t kv_head, bool values,
                                   const std::function<QString(int64_t)>& token) {
  if (!summary || !summary->contains(layer, kv_head)) {
    showMessage(label, tr("has no layer %1, kv head %2").arg(layer).arg(kv_head));
    return;
  }
  summary_ = std::move(summary);
  layer_ = layer;
  kv_head_ = kv_head;
  values_ = values;
  token_ = token;
  const CompressionSummary& s = *summary_;
  showPlaceholder(false);
  drawScores(s, layer, kv_head);
  drawEntries(s, layer, kv_head, values);

  const std::vector<int64_t> gone = s.removedPositions(layer, kv_head);
  int64_t decoding = 0, demoted = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    decoding += s.fate(layer, kv_head, r) == RowFate::EvictedDecoding ? 1 : 0;
    demoted += s.fate(layer, kv_head, r) == RowFate::Demoted ? 1 : 0;
  }
  // Layer and kv head are in the pickers and under the heatmap: the caption says what was removed.
  QString text = tr("<b>%1 %2</b>: <b>%3 of %4 rows removed</b>")
                     .arg(slot_, label.toHtmlEscaped())
                     .arg(gone.size())
                     .arg(s.rows);
  if (decoding > 0) text += tr(" (%1 by decode steps)").arg(decoding);
  if (demoted > 0) text += tr(", %1 demoted").arg(demoted);
  if (s.hasPruning()) {
    text += tr(", %1 of %2 %3 zeroed")
                .arg(s.zeroedEntries(values, layer, kv_head))
                .arg(s.rows * s.head_dim)
                .arg(values ? QStringLiteral("V") : QStringLiteral("K"));
  }
  caption_->setText(text);
  QStringList list;
  for (int64_t p : gone) list << QString::number(p);
  caption_->setToolTip(gone.empty() ? tr("no row removed") : tr("removed positions: %1").arg(list.join(QStringLiteral(", "))));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CompressionSlotView::drawScores(const CompressionSummary& s, int64_t layer, int64_t kv_head) {
  QCPColorMapData* data = scores_map_->data();
  data->clear();
  data->setSize(static_cast<int>(s.kv_heads), static_cast<int>(s.rows));
  data->setRange(QCPRange(0, static_cast<double>(s.kv_heads - 1)), QCPRange(0, static_cast<double>(std::max<int64_t>(s.rows - 1, 0))));
  std::vector<float> layer_scores;
  for (int64_t h = 0; h < s.kv_heads; ++h) {
    for (int64_t r = 0; r < s.rows; ++r) {
      const float score = s.score(layer, h, r);
      layer_scores.push_back(score);
      data->setCell(static_cast<int>(h), static_cast<int>(r), s.hasScores() ? score : 0.0);
      if (removed(s.fate(layer, h, r))) data->setAlpha(static_cast<int>(h), static_cast<int>(r), kRemovedScoreAlpha);
    }
  }
  // Scores span orders of magnitude (sinks): the top 5% saturate.
  const double low = *std::min_element(layer_scores.begin(), layer_scores.end());
  double high = quantile(layer_scores, 0.95);
  if (!(high > low)) high = low + 1.0;
  scores_map_->setDataRange(QCPRange(low, high));
  scores_labels_ = s.hasScores() ? QStringList{tr("score\n(dark: high)"), tr("score")}
                                 : QStringList{tr("no eviction\nscores"), tr("none")};
  scores_rect_->axis(QCPAxis::atBottom)->setLabel(scores_labels_.front());
  scores_rect_->axis(QCPAxis::atBottom)->setRange(-0.5, static_cast<double>(s.kv_heads) - 0.5);
  scores_rect_->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(s.rows) - 0.5);
  head_outline_->topLeft->setCoords(static_cast<double>(kv_head) - 0.5, -0.5);
  head_outline_->bottomRight->setCoords(static_cast<double>(kv_head) + 0.5, static_cast<double>(s.rows) - 0.5);
  head_outline_->setVisible(true);
}

void CompressionSlotView::drawEntries(const CompressionSummary& s, int64_t layer, int64_t kv_head, bool values) {
  QCPColorMapData* data = entries_map_->data();
  data->clear();
  data->setSize(static_cast<int>(s.head_dim), static_cast<int>(s.rows));
  data->setRange(QCPRange(0, static_cast<double>(std::max<int64_t>(s.head_dim - 1, 0))),
                 QCPRange(0, static_cast<double>(std::max<int64_t>(s.rows - 1, 0))));
  double extent = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    const bool gone = removed(s.fate(layer, kv_head, r));
    for (int64_t d = 0; d < s.head_dim; ++d) {
      const bool zero = s.zeroed(values, layer, kv_head, r, d);
      const double value = s.hasCache() && !zero ? s.entry(values, layer, kv_head, r, d) : std::nan("");
      data->setCell(static_cast<int>(d), static_cast<int>(r), value);
      if (gone) data->setAlpha(static_cast<int>(d), static_cast<int>(r), 0);  // the hatching shows through
      else if (!zero) extent = std::max(extent, std::abs(value));
    }
  }
  if (!(extent > 0)) extent = 1.0;
  entries_map_->setDataRange(QCPRange(-extent, extent));  // symmetric: 0 is the gradient's middle
  QCPAxis* x = entries_rect_->axis(QCPAxis::atBottom);
  const QString kv = values ? QStringLiteral("V") : QStringLiteral("K");
  entries_labels_ = s.hasCache() ? QStringList{tr("%1 channel \u00b7 layer %2, kv head %3").arg(kv).arg(layer).arg(kv_head),
                                               tr("%1 channel (L%2 H%3)").arg(kv).arg(layer).arg(kv_head),
                                               tr("%1 channel").arg(kv)}
                                 : QStringList{tr("no K/V recorded"), tr("no K/V")};
  x->setLabel(entries_labels_.front());
  x->setRange(-0.5, static_cast<double>(s.head_dim) - 0.5);
  entries_rect_->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(s.rows) - 0.5);
  entries_scale_->setLabel(values ? QStringLiteral("V") : QStringLiteral("K"));
}

void CompressionSlotView::fitLabels() {
  if (scores_labels_.isEmpty() || entries_labels_.isEmpty()) return;
  QCPAxis* scores = scores_rect_->axis(QCPAxis::atBottom);
  QCPAxis* entries = entries_rect_->axis(QCPAxis::atBottom);
  const int gap = QFontMetrics(entries->labelFont()).averageCharWidth();
  // Each label is centred under its inner rect; the pair fits when they keep a gap and stay on the widget.
  const auto span = [](QCPAxisRect* rect, int width) {
    const int centre = rect->rect().center().x();
    return std::pair{centre - width / 2, centre + (width + 1) / 2};
  };
  QString chosen_scores = scores_labels_.back(), chosen_entries = entries_labels_.back();
  bool found = false;
  for (const QString& s : scores_labels_) {
    const auto [s_left, s_right] = span(scores_rect_, labelWidth(scores->labelFont(), s));
    if (s_left < 0) continue;
    for (const QString& e : entries_labels_) {
      const auto [e_left, e_right] = span(entries_rect_, labelWidth(entries->labelFont(), e));
      if (s_right + gap <= e_left && e_right <= plot_->width()) {
        chosen_scores = s;
        chosen_entries = e;
        found = true;
        break;
      }
    }
    if (found) break;
  }
  if (scores->label() == chosen_scores && entries->label() == chosen_entries) return;
  scores->setLabel(chosen_scores);
  entries->setLabel(chosen_entries);
  plot_->replot(QCustomPlot::rpQueuedReplot);  // the bottom margin may change with the lines
}

void CompressionSlotView::onHover(QMouseEvent* event) {
  const QPointF at = event->position();
  // Below an inner rect: the axis label, whole (it may be shortened to fit).
  for (const auto& [rect, labels] : {std::pair{scores_rect_, &scores_labels_}, std::pair{entries_rect_, &entries_labels_}}) {
    const QRect inner = rect->rect(), outer = rect->outerRect();
    if (!labels->isEmpty() && at.y() > inner.bottom() && at.y() <= outer.bottom() && at.x() >= outer.left() &&
        at.x() <= outer.right()) {
      QToolTip::showText(event->globalPosition().toPoint(), QString(labels->front()).replace(QLatin1Char('\n'), QLatin1Char(' ')), plot_);
      return;
    }
  }
  if (!summary_) return;
  const CompressionSummary& s = *summary_;
  QString text;
  if (entries_rect_->rect().contains(at.toPoint())) {
    const auto row = static_cast<int64_t>(std::lround(entries_rect_->axis(QCPAxis::atLeft)->pixelToCoord(at.y())));
    const auto channel = static_cast<int64_t>(std::lround(entries_rect_->axis(QCPAxis::atBottom)->pixelToCoord(at.x())));
    if (row >= 0 && row < s.rows && channel >= 0 && channel < s.head_dim) {
      text = tr("position %1 %2, channel %3: %4 = %5 (%6%7)")
                 .arg(row)
                 .arg(token_ ? token_(row) : QString())
                 .arg(channel)
                 .arg(values_ ? QStringLiteral("V") : QStringLiteral("K"))
                 .arg(static_cast<double>(s.entry(values_, layer_, kv_head_, row, channel)), 0, 'g', 4)
                 .arg(QString::fromUtf8(rowFateName(s.fate(layer_, kv_head_, row))))
                 .arg(s.zeroed(values_, layer_, kv_head_, row, channel) ? tr(", zeroed") : QString());
    }
  } else if (scores_rect_->rect().contains(at.toPoint())) {
    const auto row = static_cast<int64_t>(std::lround(scores_rect_->axis(QCPAxis::atLeft)->pixelToCoord(at.y())));
    const auto head = static_cast<int64_t>(std::lround(scores_rect_->axis(QCPAxis::atBottom)->pixelToCoord(at.x())));
    if (row >= 0 && row < s.rows && head >= 0 && head < s.kv_heads) {
      text = tr("position %1 %2, kv head %3: score %4 (%5)")
                 .arg(row)
                 .arg(token_ ? token_(row) : QString())
                 .arg(head)
                 .arg(static_cast<double>(s.score(layer_, head, row)), 0, 'g', 4)
                 .arg(QString::fromUtf8(rowFateName(s.fate(layer_, head, row))));
    }
  }
  if (text.isEmpty()) QToolTip::hideText();
  else QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
}

std::vector<int64_t> CompressionSlotView::shownRemovedRows() const { return transparentRows(entries_map_); }

int64_t CompressionSlotView::shownZeroedEntries() const {
  int64_t count = 0;
  QCPColorMapData* data = entries_map_->data();
  for (int r = 0; r < data->valueSize(); ++r) {
    for (int d = 0; d < data->keySize(); ++d) count += std::isnan(data->cell(d, r)) && data->alpha(d, r) != 0 ? 1 : 0;
  }
  return count;
}

std::vector<int64_t> CompressionSlotView::shownRemovedScoreRows(int64_t kv_head) const {
  std::vector<int64_t> rows;
  QCPColorMapData* data = scores_map_->data();
  if (kv_head < 0 || kv_head >= data->keySize()) return rows;
  for (int r = 0; r < data->valueSize(); ++r) {
    if (data->alpha(static_cast<int>(kv_head), r) == kRemovedScoreAlpha) rows.push_back(r);
  }
  return rows;
}

}  // namespace kvscope::ui
