#include "ui/windows/TimelinePanel.h"

#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/WrappedLegend.h"

namespace kvscope::ui {

namespace {
QCPBars* makeBars(QCustomPlot* plot, const QString& name, const QColor& color) {
  auto* bars = new QCPBars(plot->xAxis, plot->yAxis);
  bars->setName(name);
  bars->setWidth(0.7);
  bars->setPen(QPen(color.darker(130)));
  bars->setBrush(color);
  bars->setAntialiased(false);
  return bars;
}
}  // namespace

TimelinePanel::TimelinePanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  plot_ = new QCustomPlot(this);
  plot_->setObjectName(QStringLiteral("timelinePlot"));
  plot_->setMinimumHeight(70);
  plot_->setNoAntialiasingOnDrag(true);
  accepted_ = makeBars(plot_, tr("accepted drafts"), Palette::acceptedDraft());
  correction_ = makeBars(plot_, tr("correction"), Palette::correction());
  bonus_ = makeBars(plot_, tr("bonus"), Palette::bonus());
  rejected_ = makeBars(plot_, tr("rejected drafts"), Palette::rejected());
  correction_->moveAbove(accepted_);
  bonus_->moveAbove(correction_);
  rejected_->moveAbove(bonus_);

  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setRange(0, 1.05);
  plot_->yAxis2->setLabel(tr("running alpha"));
  plot_->yAxis->setLabel(tr("tokens"));
  plot_->xAxis->setLabel(tr("round"));
  auto rounds = QSharedPointer<QCPAxisTickerFixed>::create();  // whole rounds only
  rounds->setTickStep(1);
  rounds->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot_->xAxis->setTicker(rounds);
  alpha_ = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
  alpha_->setName(tr("running alpha"));
  alpha_->setPen(QPen(QColor(40, 40, 40), 2));
  alpha_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));

  highlight_ = new QCPItemRect(plot_);
  highlight_->setLayer(QStringLiteral("background"));
  highlight_->setPen(Qt::NoPen);
  highlight_->setBrush(QColor(255, 200, 0, 70));
  calls_ = new QLabel;
  calls_->setObjectName(QStringLiteral("timelineCalls"));
  calls_->setWordWrap(true);
  calls_->setTextFormat(Qt::PlainText);
  calls_->setStyleSheet(QStringLiteral("QLabel { color:#5a3c00; }"));
  calls_->setVisible(false);

  installPlotExport(plot_, QStringLiteral("timeline"), [this] { return csv(); });

  connect(plot_, &QCustomPlot::mousePress, this, &TimelinePanel::onMousePress);

  // The key under the plot, wrapped to the column's width at any zoom (the
  // plot's own legend measured its entries narrower than it drew them, and cut them).
  const auto swatch = [](const QColor& color, const QString& name) {
    return QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2 ").arg(color.name(), name);
  };
  auto* legend = new WrappedLegend(swatch(Palette::acceptedDraft(), tr("accepted&nbsp;drafts")) +
                                   swatch(Palette::correction(), tr("correction")) + swatch(Palette::bonus(), tr("bonus")) +
                                   swatch(Palette::rejected(), tr("rejected&nbsp;drafts")) +
                                   tr("<nobr><span style='color:#282828'>&#8212;&#9679;&#8212;</span>&nbsp;running&nbsp;alpha</nobr>"));
  legend->setObjectName(QStringLiteral("timelineLegend"));
  batch_legend_ = new WrappedLegend(QString());
  batch_legend_->setObjectName(QStringLiteral("timelineBatchLegend"));
  batch_legend_->setVisible(false);
  // The keys and the plot scroll together: at 200% on a 1024x768 screen the five lines of
  // the key filled the dock and left the bars a strip; the plot keeps a readable height.
  auto* content = new QWidget;
  auto* inner = new QVBoxLayout(content);
  inner->setContentsMargins(0, 0, 0, 0);
  inner->setSpacing(0);
  inner->addWidget(legend);
  inner->addWidget(batch_legend_);
  inner->addWidget(calls_);
  inner->addWidget(plot_, 1);
  auto* area = new QScrollArea;
  area->setObjectName(QStringLiteral("timelineArea"));
  area->setFrameShape(QFrame::NoFrame);
  area->setWidgetResizable(true);
  area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  area->setWidget(content);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(area);
  plot_->setMinimumWidth(160);
  fitPlotToFont();
}

void TimelinePanel::changeEvent(QEvent* event) {
  ViewerPanel::changeEvent(event);
  if (event->type() == QEvent::FontChange) fitPlotToFont();
}

void TimelinePanel::fitPlotToFont() {
  // Room for the tick labels, the axis title and a few bars, in lines of the (zoomed) font.
  plot_->setMinimumHeight(std::max(70, 7 * QFontMetrics(font()).height()));
}

void TimelinePanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

int TimelinePanel::barCount() const { return accepted_->data()->size(); }

void TimelinePanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  QVector<double> keys, accepted, correction, bonus, rejected, alpha_keys, alpha;
  int64_t drafted_total = 0, accepted_total = 0;
  int64_t max_height = 1;
  if (snapshot) {
    for (const RoundRecord& round : snapshot->rounds) {
      if (round.index < 1) continue;
      const bool decided = round.next_token >= 0;  // accept has run
      const double key = static_cast<double>(round.index);
      const int64_t drafts = static_cast<int64_t>(round.drafts.size());
      keys << key;
      if (decided) {
        accepted << static_cast<double>(round.accepted);
        correction << (round.bonus ? 0.0 : 1.0);
        bonus << (round.bonus ? 1.0 : 0.0);
        rejected << static_cast<double>(drafts - round.accepted);
        drafted_total += drafts;
        accepted_total += round.accepted;
        if (drafted_total > 0) {
          alpha_keys << key;
          alpha << static_cast<double>(accepted_total) / static_cast<double>(drafted_total);
        }
      } else {  // drafted, not yet judged: show the drafts as pending (rejected colour would lie)
        accepted << 0.0;
        correction << 0.0;
        bonus << 0.0;
        rejected << 0.0;
      }
      max_height = std::max<int64_t>(max_height, drafts + 1);
    }
  }
  accepted_->setData(keys, accepted, true);
  correction_->setData(keys, correction, true);
  bonus_->setData(keys, bonus, true);
  rejected_->setData(keys, rejected, true);
  alpha_->setData(alpha_keys, alpha, true);

  const double last = keys.isEmpty() ? 1.0 : keys.back();
  plot_->xAxis->setRange(0.4, std::max(last, 8.0) + 0.6);
  plot_->yAxis->setRange(0, static_cast<double>(max_height) + 0.5);
  const Cursor& cursor = context().cursor();
  highlight_->setVisible(cursor.round >= 1);
  highlight_->topLeft->setCoords(static_cast<double>(cursor.round) - 0.5, static_cast<double>(max_height) + 0.5);
  highlight_->bottomRight->setCoords(static_cast<double>(cursor.round) + 0.5, 0);
  // A capture's rounds are inferred from the engine's calls: name the calls.
  const bool capture = snapshot && snapshot->from_capture;
  plot_->xAxis->setLabel(capture ? tr("round (one per target call)") : tr("round"));
  calls_->setVisible(capture);
  if (capture) {
    calls_->setText(tr("round %1: %2").arg(cursor.round).arg(callsOfRound(*snapshot, cursor.round)));
  }
  showBatch(snapshot);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

namespace {
// Markers of up to 8 sequences told apart by colour and shape (the bars' colours are taken).
QColor sequenceColor(size_t b) {
  static const QColor colors[] = {QColor(27, 94, 32),  QColor(74, 20, 140), QColor(0, 96, 100),  QColor(136, 14, 79),
                                  QColor(62, 39, 35),  QColor(13, 71, 161), QColor(191, 54, 12), QColor(51, 51, 51)};
  return colors[b % 8];
}
// A marker's shape and the character that draws it in the key.
struct MarkerShape {
  QCPScatterStyle::ScatterShape shape;
  const char* glyph;
};
MarkerShape sequenceShape(size_t b) {
  static const MarkerShape shapes[] = {{QCPScatterStyle::ssDiamond, "&#9670;"},
                                       {QCPScatterStyle::ssTriangle, "&#9650;"},
                                       {QCPScatterStyle::ssSquare, "&#9632;"},
                                       {QCPScatterStyle::ssTriangleInverted, "&#9660;"}};
  return shapes[(b / 8 + b) % 4];
}
constexpr size_t kMaxSequenceMarkers = 16;  // beyond, the markers of one round would overlap: the legend says so
}  // namespace

void TimelinePanel::showBatch(const SessionSnapshot* snapshot) {
  const size_t batch = snapshot ? snapshot->batch_accepted.size() : 0;
  const size_t drawn = std::min(batch, kMaxSequenceMarkers);
  while (sequences_.size() < drawn) {
    const size_t b = sequences_.size();
    QCPGraph* graph = plot_->addGraph(plot_->xAxis, plot_->yAxis);
    graph->setLineStyle(QCPGraph::lsNone);
    graph->setScatterStyle(QCPScatterStyle(sequenceShape(b).shape, QPen(Qt::white, 1), sequenceColor(b), 9));
    graph->setName(tr("sequence %1").arg(b));
    sequences_.push_back(graph);
  }
  QString keys;
  for (size_t b = 0; b < sequences_.size(); ++b) {
    QVector<double> x, y;
    if (b < drawn) {
      const auto& accepted = snapshot->batch_accepted[b];
      // Side by side within the round's bar, in sequence order.
      const double offset = drawn > 1 ? -0.3 + 0.6 * static_cast<double>(b) / static_cast<double>(drawn - 1) : 0.0;
      for (size_t round = 1; round < accepted.size(); ++round) {
        if (accepted[round] < 0) continue;
        x << static_cast<double>(round) + offset;
        y << static_cast<double>(accepted[round]);
      }
      keys += QStringLiteral("<nobr><span style='color:%1'>%2</span>&nbsp;%3</nobr> ")
                  .arg(sequenceColor(b).name(), QLatin1String(sequenceShape(b).glyph))
                  .arg(b);
    }
    sequences_[b]->setData(x, y, true);
    sequences_[b]->setVisible(b < drawn);
  }
  batch_legend_->setVisible(drawn > 1);
  if (drawn > 1) {
    plot_->yAxis->setRangeLower(-0.45);  // a sequence that accepted nothing is a marker at 0: above the axis
    QString text = tr("drafts each sequence accepted: %1; bars: sequence %2").arg(keys.trimmed()).arg(snapshot->shown_sequence);
    if (batch > drawn) text += tr(" (markers for the first %1 of %2 sequences)").arg(drawn).arg(batch);
    batch_legend_->setLegend(text);
  }
}

std::vector<std::vector<std::pair<double, double>>> TimelinePanel::sequenceMarkers() const {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (QCPGraph* graph : sequences_) {
    if (!graph->visible()) break;
    std::vector<std::pair<double, double>> points;
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) points.emplace_back(it->key, it->value);
    out.push_back(std::move(points));
  }
  return out;
}

QString TimelinePanel::callsLine() const { return calls_->isVisibleTo(this) ? calls_->text() : QString(); }

QString TimelinePanel::callsOfRound(const SessionSnapshot& snapshot, int64_t round) {
  // Forwards only: "drafter call 7", "target call 2" (a change between calls is ", between calls").
  QStringList drafter, target;
  for (const CacheEvent& e : snapshot.events.events()) {
    if (e.round != round || e.call.empty() || e.call.find(',') != std::string::npos) continue;
    const QString call = QString::fromStdString(e.call);
    const QString number = call.section(QLatin1Char(' '), -1);
    QStringList& list = call.startsWith(QStringLiteral("drafter")) ? drafter : target;
    if (!list.contains(number)) list << number;
  }
  QStringList parts;
  if (!drafter.isEmpty()) {
    parts << (drafter.size() == 1 ? tr("drafter call %1").arg(drafter.front())
                                  : tr("drafter calls %1\u2013%2").arg(drafter.front(), drafter.back()));
  }
  if (!target.isEmpty()) parts << tr("target call %1").arg(target.join(QStringLiteral(", ")));
  return parts.join(QStringLiteral(" \u2192 "));
}

QString TimelinePanel::csv() const {
  QString out = QStringLiteral("round,start_length,gamma,drafts,accepted,next_token,bonus,emitted,running_alpha,draft_ms,verify_ms\n");
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot) return out;
  int64_t drafted = 0, accepted = 0;
  for (const RoundRecord& round : snapshot->rounds) {
    if (round.index < 1) continue;
    drafted += static_cast<int64_t>(round.drafts.size());
    accepted += round.accepted;
    out += QStringLiteral("%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11\n")
               .arg(round.index)
               .arg(round.start_length)
               .arg(round.gamma)
               .arg(round.drafts.size())
               .arg(round.accepted)
               .arg(round.next_token)
               .arg(round.bonus ? 1 : 0)
               .arg(round.emitted.size())
               .arg(drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0, 0, 'f', 4)
               .arg(round.draft_ms, 0, 'f', 3)
               .arg(round.verify_ms, 0, 'f', 3);
  }
  return out;
}

void TimelinePanel::onMousePress(QMouseEvent* event) {
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const auto round = static_cast<qint64>(std::lround(x));
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || round < 1 || round > snapshot->lastRound()) return;
  emit roundRequested(round);
}

}  // namespace kvscope::ui
