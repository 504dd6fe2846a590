#include "ui/widgets/SelfSpeculationView.h"

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

// The outcome column's colours: accepted draft green, correction red, bonus
// blue (apart for colour-blind eyes by lightness too).
const QColor kAccepted(44, 160, 44);
const QColor kCorrection(214, 39, 40);
const QColor kBonus(31, 119, 180);

QCPColorGradient outcomeGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.0, kAccepted);
  g.setColorStopAt(0.5, kCorrection);
  g.setColorStopAt(1.0, kBonus);
  g.setLevelCount(3);
  return g;
}

// The outcome column's value (a prompt row's cell is drawn transparent, whatever its value).
double outcomeValue(DraftOutcome o) {
  return o == DraftOutcome::Accepted ? 1.0 : o == DraftOutcome::Correction ? 2.0 : 3.0;
}

QString outcomeText(DraftOutcome o) {
  switch (o) {
    case DraftOutcome::Prompt: return QObject::tr("prompt");
    case DraftOutcome::Accepted: return QObject::tr("accepted draft");
    case DraftOutcome::Correction: return QObject::tr("target's correction (draft rejected)");
    case DraftOutcome::Bonus: return QObject::tr("target's bonus token (every draft accepted)");
  }
  return {};
}

void setRows(QCPColorMapData* data, int columns, int64_t positions) {
  data->clear();
  data->setSize(columns, static_cast<int>(positions));
  data->setRange(QCPRange(0, std::max(0, columns - 1)), QCPRange(0, static_cast<double>(std::max<int64_t>(positions - 1, 0))));
}

}  // namespace

std::vector<DraftOutcome> draftOutcomes(const SelfSpeculationResult& result, int64_t positions) {
  std::vector<DraftOutcome> out(static_cast<size_t>(std::max<int64_t>(positions, 0)), DraftOutcome::Prompt);
  const auto mark = [&](int64_t p, DraftOutcome o) {
    if (p >= 0 && p < positions) out[static_cast<size_t>(p)] = o;
  };
  for (const SelfSpeculationRound& round : result.rounds_log) {
    for (int64_t i = 0; i < round.accepted; ++i) mark(round.first_position + i, DraftOutcome::Accepted);
    const bool all = round.accepted == static_cast<int64_t>(round.drafts.size());
    mark(round.first_position + round.accepted, all ? DraftOutcome::Bonus : DraftOutcome::Correction);
  }
  return out;
}

SelfSpeculationView::SelfSpeculationView(const QString& slot, QWidget* parent) : QWidget(parent), slot_(slot) {
  setObjectName(QStringLiteral("selfSpeculation") + slot);
  caption_ = makeCaption();

  plot_ = makeBarePlot(QStringLiteral("selfSpeculationCaches") + slot);
  full_rect_ = new QCPAxisRect(plot_);
  draft_rect_ = new QCPAxisRect(plot_);
  compare_rect_ = new QCPAxisRect(plot_);
  scale_ = new QCPColorScale(plot_);
  full_rect_->setMinimumSize(56, 60);
  draft_rect_->setMinimumSize(56, 60);
  compare_rect_->setMinimumSize(24, 60);
  plot_->plotLayout()->addElement(0, 0, full_rect_);
  plot_->plotLayout()->addElement(0, 1, draft_rect_);
  plot_->plotLayout()->addElement(0, 2, compare_rect_);
  plot_->plotLayout()->addElement(0, 3, scale_);
  // The full cache's rect also holds the position axis: a little more room, so both heatmaps are about as wide.
  plot_->plotLayout()->setColumnStretchFactors({2.3, 2.0, 0.45, 0.1});
  scale_->setBarWidth(8);
  auto* rows = new QCPMarginGroup(plot_);
  for (QCPLayoutElement* e : std::initializer_list<QCPLayoutElement*>{full_rect_, draft_rect_, compare_rect_, scale_}) {
    e->setMarginGroup(QCP::msTop | QCP::msBottom, rows);
  }
  for (QCPAxisRect* rect : {full_rect_, draft_rect_, compare_rect_}) {
    rect->setupFullAxesBox(false);
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // position 0 on top, as in the KV view
    rect->axis(QCPAxis::atBottom)->ticker()->setTickCount(3);
    if (rect != full_rect_) rect->axis(QCPAxis::atLeft)->setTickLabels(false);
  }
  draft_rect_->setBackground(removedRowHatch());
  full_rect_->axis(QCPAxis::atLeft)->setLabel(tr("position"));
  compare_rect_->axis(QCPAxis::atBottom)->setTickLabels(false);
  compare_rect_->axis(QCPAxis::atBottom)->setLabel(tr("\u0394 | by"));
  compare_rect_->axis(QCPAxis::atBottom)->setRange(-0.5, 1.5);

  QCPColorGradient entries(QCPColorGradient::gpPolar);  // the KV view's colours
  full_map_ = addColorMap(full_rect_, scale_, entries);
  draft_map_ = addColorMap(draft_rect_, scale_, entries);
  difference_map_ = addColorMap(compare_rect_, nullptr, QCPColorGradient(QCPColorGradient::gpGrayscale).inverted());
  outcome_map_ = addColorMap(compare_rect_, nullptr, outcomeGradient());
  for (QCPAxisRect* rect : {full_rect_, draft_rect_, compare_rect_}) {  // after the maps: drawn over them
    auto* line = new QCPItemStraightLine(plot_);
    line->setClipAxisRect(rect);
    for (QCPItemPosition* p : {line->point1, line->point2}) p->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    line->setPen(QPen(QColor(20, 20, 20), 2, Qt::DashLine));
    line->setVisible(false);
    prompt_lines_.push_back(line);
  }

  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &SelfSpeculationView::onHover);
  installPlotExport(plot_, QStringLiteral("self-speculation-") + slot);

  auto* legend = new QLabel(tr("<span style='background:#c8c8c8'>&nbsp;&#9636;&#9636;&nbsp;</span> removed from the "
                               "drafting cache &nbsp; <b>\u0394</b>: drafting row vs full (dark: differs) &nbsp; "
                               "<b>by</b>: <span style='color:%1'>&#9646;</span> accepted draft "
                               "<span style='color:%2'>&#9646;</span> correction <span style='color:%3'>&#9646;</span> "
                               "bonus &nbsp; - - prompt ends")
                                .arg(kAccepted.name(), kCorrection.name(), kBonus.name()));
  legend->setWordWrap(true);
  legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(caption_);
  layout->addWidget(plot_, 1);
  layout->addWidget(legend);
  showMessage(QString(), tr("not run yet"));
}

QString SelfSpeculationView::caption() const { return caption_->text(); }

QString SelfSpeculationView::speedText(const SpeculationSpeed& speed, int64_t tokens) {
  if (speed.plain_seconds <= 0 || speed.self_seconds <= 0) return tr(" &middot; speed against plain decoding not measured");
  const double ms = 1000.0;
  const double speedup = speed.plain_seconds / speed.self_seconds;
  const QString verdict = speedup >= 1 ? tr("<b>%1x faster</b>").arg(speedup, 0, 'f', 2)
                                       : tr("<b>%1x slower</b>").arg(1 / speedup, 0, 'f', 2);
  return tr(" &middot; %1 than plain greedy decoding (%2 ms against %3 ms for %4 tokens)")
      .arg(verdict)
      .arg(speed.self_seconds * ms, 0, 'f', 0)
      .arg(speed.plain_seconds * ms, 0, 'f', 0)
      .arg(tokens);
}

void SelfSpeculationView::clearMaps() {
  for (QCPColorMap* map : {full_map_, draft_map_, difference_map_, outcome_map_}) map->data()->clear();
  for (QCPItemStraightLine* line : prompt_lines_) line->setVisible(false);
  outcomes_.clear();
}

void SelfSpeculationView::showMessage(const QString& label, const QString& why) {
  result_.reset();
  clearMaps();
  caption_->setText(messageCaption(slot_, label, why));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SelfSpeculationView::showResult(std::shared_ptr<const SelfSpeculationResult> result, const QString& label,
                                     int64_t layer, int64_t kv_head, bool values, const SpeculationSpeed& speed,
                                     const std::function<QString(int64_t)>& token) {
  if (!result || !result->caches.contains(layer, kv_head)) {
    showMessage(label, tr("self-speculation has no layer %1, kv head %2 to show").arg(layer).arg(kv_head));
    return;
  }
  result_ = std::move(result);
  layer_ = layer;
  kv_head_ = kv_head;
  values_ = values;
  token_ = token;
  const SelfSpeculationResult& r = *result_;
  const DraftCacheComparison& c = r.caches;
  outcomes_ = draftOutcomes(r, c.positions);
  drawCaches(r, layer, kv_head, values);
  drawComparison(r, layer, kv_head, values);
  markPromptEnd(static_cast<double>(c.compressed_rows) + 0.5);  // the last prompt token is the first one fed

  int64_t prompt_held = 0;
  for (int64_t p = 0; p < c.compressed_rows; ++p) prompt_held += c.holds(layer, kv_head, p) ? 1 : 0;
  const double ms = 1000.0;
  caption_->setText(tr("<b>%1 %2</b>, self-speculation: <b>alpha %3</b> (%4 of %5 drafts accepted, %6 rounds) "
                       "&middot; the drafting cache reads <b>%7 of %8 prompt rows</b> + %9 it wrote "
                       "&middot; draft %10 ms, verify %11 ms &middot; %12 of layer %13, kv head %14")
                        .arg(slot_, label.toHtmlEscaped())
                        .arg(r.alpha, 0, 'f', 2)
                        .arg(r.accepted)
                        .arg(r.drafted)
                        .arg(r.rounds)
                        .arg(prompt_held)
                        .arg(c.compressed_rows)
                        .arg(c.positions - c.compressed_rows)
                        .arg(r.draft_seconds * ms, 0, 'f', 0)
                        .arg(r.verify_seconds * ms, 0, 'f', 0)
                        .arg(values ? QStringLiteral("V") : QStringLiteral("K"))
                        .arg(layer)
                        .arg(kv_head) +
                    speedText(speed, static_cast<int64_t>(r.tokens.size())));
  caption_->setToolTip(tr("The target drafts over its own cache compressed by the policy and verifies over the full "
                          "cache, so the output is exactly the target's; alpha is what the compression costs. "
                          "Draft time is the target's weights per drafted token at any budget. The speed compares "
                          "wall times of this run and of plain greedy decoding of as many tokens, measured one after "
                          "the other on the engine thread (prefills included): when the target drafts for itself, "
                          "every draft costs about a full step, so alpha near 1 is needed just to break even."));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SelfSpeculationView::drawCaches(const SelfSpeculationResult& r, int64_t layer, int64_t kv_head, bool values) {
  const DraftCacheComparison& c = r.caches;
  const int dim = static_cast<int>(c.head_dim);
  setRows(full_map_->data(), dim, c.positions);
  setRows(draft_map_->data(), dim, c.positions);
  double extent = 0;
  for (int64_t p = 0; p < c.positions; ++p) {
    const bool held = c.holds(layer, kv_head, p);
    for (int d = 0; d < dim; ++d) {
      const double full = c.entry(false, values, layer, kv_head, p, d);
      full_map_->data()->setCell(d, static_cast<int>(p), full);
      draft_map_->data()->setCell(d, static_cast<int>(p), c.entry(true, values, layer, kv_head, p, d));
      if (!held) draft_map_->data()->setAlpha(d, static_cast<int>(p), 0);  // the hatching shows through
      extent = std::max(extent, std::abs(full));
    }
  }
  if (!(extent > 0)) extent = 1.0;
  // One symmetric range for both: the same number is the same colour on either side.
  full_map_->setDataRange(QCPRange(-extent, extent));
  draft_map_->setDataRange(QCPRange(-extent, extent));
  const QString kv = values ? QStringLiteral("V") : QStringLiteral("K");
  full_rect_->axis(QCPAxis::atBottom)->setLabel(tr("full cache\n(verifies)"));
  draft_rect_->axis(QCPAxis::atBottom)->setLabel(tr("compressed\n(drafts)"));
  scale_->setLabel(kv);
  // The first and last channel only: two labels never run into each other, however narrow or zoomed.
  auto channels = QSharedPointer<QCPAxisTickerText>::create();
  channels->addTick(0, QStringLiteral("0"));
  if (dim > 1) channels->addTick(dim - 1, QString::number(dim - 1));
  for (QCPAxisRect* rect : {full_rect_, draft_rect_}) {
    rect->axis(QCPAxis::atBottom)->setTicker(channels);
    rect->axis(QCPAxis::atBottom)->setRange(-0.5, static_cast<double>(dim) - 0.5);
    rect->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(c.positions) - 0.5);
  }
}

void SelfSpeculationView::drawComparison(const SelfSpeculationResult& r, int64_t layer, int64_t kv_head, bool values) {
  const DraftCacheComparison& c = r.caches;
  // Two maps over the same two columns, each transparent in the other's: the
  // difference in column 0, the outcome in column 1 (a one-column colour map
  // would draw zero pixels wide).
  QCPColorMapData* diff = difference_map_->data();
  QCPColorMapData* outcome = outcome_map_->data();
  setRows(diff, 2, c.positions);
  setRows(outcome, 2, c.positions);
  double largest = 0;
  for (int64_t p = 0; p < c.positions; ++p) {
    const int row = static_cast<int>(p);
    const double d = c.rowDifference(values, layer, kv_head, p);
    diff->setCell(0, row, d);
    diff->setAlpha(1, row, 0);
    if (!c.holds(layer, kv_head, p)) diff->setAlpha(0, row, 0);
    largest = std::max(largest, d);
    const DraftOutcome o = outcomes_[static_cast<size_t>(p)];
    outcome->setCell(1, row, outcomeValue(o));
    outcome->setAlpha(0, row, 0);
    if (o == DraftOutcome::Prompt) outcome->setAlpha(1, row, 0);
  }
  // Relative differences: 0 is white; the darkest is the largest seen, at least 1% (float noise stays white).
  difference_map_->setDataRange(QCPRange(0, std::max(largest, 0.01)));
  outcome_map_->setDataRange(QCPRange(1, 3));
  compare_rect_->axis(QCPAxis::atLeft)->setRange(-0.5, static_cast<double>(c.positions) - 0.5);
}

void SelfSpeculationView::markPromptEnd(double row) {
  for (QCPItemStraightLine* line : prompt_lines_) {
    line->point1->setCoords(-1e6, row);
    line->point2->setCoords(1e6, row);
    line->setVisible(true);
  }
}

QString SelfSpeculationView::hoverText(int64_t position, QCPAxisRect* rect, double x) const {
  const DraftCacheComparison& c = result_->caches;
  const QString kv = values_ ? QStringLiteral("V") : QStringLiteral("K");
  const QString where = tr("position %1 %2").arg(position).arg(token_ ? token_(position) : QString());
  const bool held = c.holds(layer_, kv_head_, position);
  if (rect == compare_rect_) {
    if (std::lround(x) == 0) {
      return held ? tr("%1: drafting row vs full, max |\u0394%2| / max |%2| = %3").arg(where, kv).arg(c.rowDifference(values_, layer_, kv_head_, position), 0, 'g', 3)
                  : tr("%1: removed from the drafting cache").arg(where);
    }
    return tr("%1: %2").arg(where, outcomeText(outcomes_[static_cast<size_t>(position)]));
  }
  const auto channel = static_cast<int64_t>(std::lround(x));
  if (channel < 0 || channel >= c.head_dim) return {};
  const bool draft = rect == draft_rect_;
  if (draft && !held) return tr("%1: removed from the drafting cache by the policy").arg(where);
  return tr("%1, channel %2: %3 = %4 (%5)")
      .arg(where)
      .arg(channel)
      .arg(kv)
      .arg(static_cast<double>(c.entry(draft, values_, layer_, kv_head_, position, channel)), 0, 'g', 4)
      .arg(draft ? tr("drafting cache") : tr("full cache"));
}

void SelfSpeculationView::onHover(QMouseEvent* event) {
  if (!result_) return;
  const QPointF at = event->position();
  QString text;
  for (QCPAxisRect* rect : {full_rect_, draft_rect_, compare_rect_}) {
    if (!rect->rect().contains(at.toPoint())) continue;
    const auto position = static_cast<int64_t>(std::lround(rect->axis(QCPAxis::atLeft)->pixelToCoord(at.y())));
    if (position >= 0 && position < result_->caches.positions) {
      text = hoverText(position, rect, rect->axis(QCPAxis::atBottom)->pixelToCoord(at.x()));
    }
  }
  if (text.isEmpty()) QToolTip::hideText();
  else QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
}

std::vector<int64_t> SelfSpeculationView::shownRemovedRows() const { return transparentRows(draft_map_); }

int64_t SelfSpeculationView::shownOutcomes(DraftOutcome outcome) const {
  int64_t count = 0;
  QCPColorMapData* data = outcome_map_->data();
  for (int r = 0; r < data->valueSize(); ++r) {
    const bool prompt = data->alpha(1, r) == 0;
    if (outcome == DraftOutcome::Prompt ? prompt : !prompt && data->cell(1, r) == outcomeValue(outcome)) ++count;
  }
  return count;
}

}  // namespace kvscope::ui
