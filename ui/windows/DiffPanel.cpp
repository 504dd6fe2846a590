#include "ui/windows/DiffPanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTextBrowser>
#include <QAbstractTextDocumentLayout>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "core/cache/fault.h"

#include "ui/widgets/HoverCellHighlight.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PlotExport.h"
#include "ui/widgets/RoundName.h"
#include "ui/widgets/WrappedLegend.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {
constexpr double kFloor = 1e-9;  // log axes: exact zeros drawn at the floor

QCPGraph* pointsGraph(QCustomPlot* plot, const QColor& color, QCPScatterStyle::ScatterShape shape) {
  QCPGraph* graph = plot->addGraph();
  graph->setLineStyle(QCPGraph::lsNone);
  graph->setScatterStyle(QCPScatterStyle(shape, color, color, 7));
  return graph;
}

QPushButton* button(const QString& text, const QString& name, const QString& tip) {
  auto* b = new QPushButton(text);
  b->setObjectName(name);
  b->setToolTip(tip);
  return b;
}

QCPItemRect* cellRect(QCustomPlot* plot, double x, double y, const QPen& pen, const QBrush& brush) {
  auto* item = new QCPItemRect(plot);
  item->topLeft->setCoords(x - 0.5, y - 0.5);
  item->bottomRight->setCoords(x + 0.5, y + 0.5);
  item->setPen(pen);
  item->setBrush(brush);
  return item;
}

QString cacheName(CacheRole cache) { return QString::fromUtf8(cacheRoleName(cache)); }

// A diff that ran with a fault says what the fault breaks and the real bug it
// mirrors (the teacher's "what were we looking for"); nothing without one.
QString faultExplanation(const std::string& name) {
  for (const FaultInfo& info : allFaults()) {
    if (name != info.name) continue;
    return QObject::tr("<p style='margin:2px 0'><b>Fault %1</b> breaks: %2<br><b>Real bug it mirrors:</b> %3</p>")
        .arg(QString::fromUtf8(info.name), QString::fromUtf8(info.breaks).toHtmlEscaped(),
             QString::fromUtf8(info.real_world).toHtmlEscaped());
  }
  return QString();
}
}  // namespace

DiffPanel::DiffPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  run_ = button(tr("Run diff"), QStringLiteral("runDiff"),
                tr("Restarts the session with the current settings (cache on, the chosen fault) and runs it to the end,\n"
                   "recomputing every draft and verify pass without a cache, comparing the logits and finding the\n"
                   "first cache operation that broke the bookkeeping. The cursor stays where it is."));
  go_root_ = button(tr("Go to root cause"), QStringLiteral("goToRootCause"),
                    tr("Moves the cursor to the cache operation that first broke the contract: its round, phase,\n"
                       "cache, layer and first wrong row."));
  go_bad_ = button(tr("Go to first bad cell"), QStringLiteral("goToBadCell"),
                   tr("Moves the cursor to the audit's first wrong row: its moment, layer, worst kv head and row."));
  audit_ = button(tr("Audit at cursor"), QStringLiteral("auditAtCursor"),
                  tr("Aligns both caches' rows at the cursor's moment with the rows the bookkeeping expects and\n"
                     "recomputes K and V from scratch (live sessions): per layer, row and head. The cursor stays."));
  auto* header = new QHBoxLayout;
  for (QPushButton* b : {run_, go_root_, go_bad_, audit_}) header->addWidget(b);
  header->addStretch(1);

  // A browser, not a label: a long sentence scrolls instead of growing the window past small screens.
  report_ = new QTextBrowser;
  report_->setObjectName(QStringLiteral("diffReport"));
  report_->setMinimumHeight(48);
  report_->setMaximumHeight(92);
  report_->setStyleSheet(QStringLiteral("QTextBrowser { background:#fffafa; }"));
  // A scroll bar appearing narrows the text and wraps it again: fit to the new lines.
  connect(report_->document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
          [this] { QTimer::singleShot(0, this, &DiffPanel::fitReport); });

  positions_ = new QCustomPlot;
  positions_->setObjectName(QStringLiteral("diffPlot"));
  positions_->setMinimumHeight(60);
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
  positions_->yAxis2->setLabel(tr("KL"));
  const QColor colors[3] = {Palette::acceptedDraft().darker(120), Palette::bonus().darker(120), Palette::pruned()};
  for (int v = 0; v < 3; ++v) {  // target verify queries: discs; drafter draft queries: triangles
    points_[0][v] = pointsGraph(positions_, colors[v], QCPScatterStyle::ssDisc);
    points_[1][v] = pointsGraph(positions_, colors[v], QCPScatterStyle::ssTriangle);
  }
  kl_ = positions_->addGraph(positions_->xAxis, positions_->yAxis2);
  kl_->setName(tr("KL"));
  kl_->setPen(QPen(QColor(90, 90, 200), 1, Qt::DashLine));
  installPlotExport(positions_, QStringLiteral("diff"));

  audit_plot_ = new QCustomPlot;
  audit_plot_->setObjectName(QStringLiteral("auditPlot"));
  new HoverCellHighlight(audit_plot_);  // presenter's pointer on the cell under the mouse
  audit_plot_->setMinimumHeight(50);
  audit_plot_->xAxis->setLabel(tr("physical row"));
  audit_plot_->yAxis->setLabel(tr("layer"));
  audit_plot_->yAxis->setRangeReversed(true);
  auto rows = QSharedPointer<QCPAxisTickerFixed>::create();
  rows->setTickStep(1);
  rows->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  audit_plot_->xAxis->setTicker(rows);
  audit_map_ = new QCPColorMap(audit_plot_->xAxis, audit_plot_->yAxis);
  audit_map_->setInterpolate(false);
  auto* scale = new QCPColorScale(audit_plot_);
  scale->setBarWidth(10);
  scale->setLabel(tr("log10 |\u0394|"));
  audit_plot_->plotLayout()->addElement(0, 1, scale);
  audit_map_->setColorScale(scale);
  QCPColorGradient gradient(QCPColorGradient::gpHot);
  gradient.setNanHandling(QCPColorGradient::nhNanColor);
  gradient.setNanColor(QColor(200, 200, 200));  // values not compared (no model, or identity broken)
  audit_map_->setGradient(gradient.inverted());
  installPlotExport(audit_plot_, QStringLiteral("audit"));
  connect(audit_plot_, &QCustomPlot::mousePress, this, &DiffPanel::onAuditClick);
  connect(audit_plot_, &QCustomPlot::beforeReplot, this, &DiffPanel::fitAuditCaption);
  connect(audit_plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
    QString tip = auditCellText(event->position());
    // Below the grid, on its caption: the whole caption (it may be elided).
    if (tip.isEmpty() && event->position().y() > audit_plot_->axisRect()->bottom()) tip = auditAxisTitle();
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(event->globalPosition().toPoint(), tip, audit_plot_);
  });

  auto* legend = new WrappedLegend(QStringLiteral("<span style='color:%1'>●</span> agree &nbsp;"
                                           "<span style='color:%2'>●</span> float noise &nbsp;"
                                           "<span style='color:%3'>●</span> divergent &nbsp;"
                                           "<span style='color:#5a5ac8'>- - -</span> KL &nbsp;&nbsp; audit: "
                                           "white\u2192red |\u0394|, "
                                           "<span style='background:#c8c8c8'>&nbsp;&nbsp;&nbsp;</span> not compared; rows: ")
                                .arg(Palette::acceptedDraft().darker(120).name(), Palette::bonus().darker(120).name(),
                                     Palette::pruned().name()) +
                            Palette::rowStateLegend());
  legend->setObjectName(QStringLiteral("diffLegend"));

  legend->setToolTip(tr("Audit grid: each cell is a layer's physical row, white to red by log10 of the largest |\u0394| "
                        "between the cached K/V and a recompute from scratch. Grey: not compared, because there is no "
                        "reference model (a capture checked by structure only) or the row's identity is already wrong "
                        "(its verdict colour says how): rows the bookkeeping did not expect are filled in their verdict's colour."));
  // The grid's caption is its axis label ("physical row · audit of the target cache
  // after round 3 prune"): said where the eye reads the axis, at no cost in height.
  audit_caption_ = new QLabel(this);
  audit_caption_->setObjectName(QStringLiteral("auditCaption"));
  audit_caption_->hide();
  plots_ = new QSplitter(Qt::Vertical);
  plots_->addWidget(positions_);
  plots_->addWidget(audit_plot_);
  // The plots keep a height their axes can be read at (fitPlotsToFont); a
  // short dock at presenter zoom scrolls them rather than crushing them.
  auto* plots_area = new QScrollArea;
  plots_area->setObjectName(QStringLiteral("diffPlotsArea"));
  plots_area->setFrameShape(QFrame::NoFrame);
  plots_area->setWidgetResizable(true);
  plots_area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  // The legend scrolls with the plots it explains: at 200% on a 1024x768 screen, kept
  // outside it took three lines of a short dock and left the plots a strip a few pixels tall.
  auto* plots_and_legend = new QWidget;
  auto* scrolled = new QVBoxLayout(plots_and_legend);
  scrolled->setContentsMargins(0, 0, 0, 0);
  scrolled->addWidget(plots_, 1);
  scrolled->addWidget(legend);
  plots_area->setWidget(plots_and_legend);
  plots_area->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Ignored);
  for (QCustomPlot* plot : {positions_, audit_plot_}) {
    connect(plot, &QCustomPlot::beforeReplot, this, [this, plot] { fitTicks(plot); });
  }
  fitPlotsToFont();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(header);
  layout->addWidget(report_);
  layout->addWidget(plots_area, 1);

  connect(run_, &QPushButton::clicked, this, &DiffPanel::runDiffRequested);
  connect(audit_, &QPushButton::clicked, this, [this] { emit auditRequested(this->context().cursor().moment()); });
  connect(go_root_, &QPushButton::clicked, this, [this] {
    if (const Cursor c = rootCauseCursor(); c.valid()) this->context().setCursor(c);
  });
  connect(go_bad_, &QPushButton::clicked, this, [this] {
    if (const Cursor c = badCellCursor(); c.valid()) this->context().setCursor(c);
  });
  refresh();  // no session yet: say so, every action off
}

void DiffPanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  plots_->setOrientation(10 * width() > 13 * height() ? Qt::Horizontal : Qt::Vertical);
  // A short dock (720p): the report scrolls in fewer lines so the plots keep
  // room for their axes and labels; log axes with fewer ticks do not collide.
  fitReport();
  const int plot_height = plots_->orientation() == Qt::Horizontal ? plots_->height() : plots_->height() / 2;
  const int ticks = std::clamp(plot_height / 45, 2, 5);
  for (QCPAxis* axis : {positions_->yAxis, positions_->yAxis2}) axis->ticker()->setTickCount(ticks);
}

void DiffPanel::changeEvent(QEvent* event) {
  ViewerPanel::changeEvent(event);
  if (event->type() == QEvent::FontChange) {
    fitPlotsToFont();
    // The report's lines change height with the font: now (a zoom's layout
    // restore follows at once), and again once the text is laid out anew.
    fitReport();
    QTimer::singleShot(0, this, &DiffPanel::fitReport);
  }
}

void DiffPanel::fitPlotsToFont() {
  // Room for the ticks, the axis title and a few lines of data, in lines of
  // the (zoomed) font: at 150% on a 1024x768 screen a share of the dock was
  // about 20 px, no room for a single point.
  const int line = QFontMetrics(font()).height();
  for (QCustomPlot* plot : {positions_, audit_plot_}) plot->setMinimumHeight(std::max(60, 8 * line));
}

// The smallest of 1, 2, 5, 10, 20, 50, ... that is at least `at_least`.
static double niceStep(double at_least) {
  double step = 1;
  for (;;) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * step >= at_least) return m * step;
    }
    step *= 10;
  }
}

void DiffPanel::fitTicks(QCustomPlot* plot) {
  // Whole-number axes (positions, rows, layers): ticks far enough apart that
  // their labels never run together ("10203040") or overlap, at any zoom.
  bool changed = false;
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    auto fixed = axis->ticker().dynamicCast<QCPAxisTickerFixed>();
    if (!fixed || axis->scaleType() != QCPAxis::stLinear) continue;
    const QFontMetrics metrics(axis->tickLabelFont());
    const QString widest = QString::number(static_cast<int64_t>(std::max(std::abs(axis->range().lower), std::abs(axis->range().upper))));
    const double label = axis->orientation() == Qt::Horizontal ? metrics.horizontalAdvance(widest) + 2 * metrics.averageCharWidth()
                                                                : metrics.height() + 2;
    const double per_unit = std::abs(axis->coordToPixel(1) - axis->coordToPixel(0));
    const double step = niceStep(label / std::max(per_unit, 1e-3));
    if (fixed->tickStep() == step && fixed->scaleStrategy() == QCPAxisTickerFixed::ssNone) continue;
    fixed->setTickStep(step);
    fixed->setScaleStrategy(QCPAxisTickerFixed::ssNone);
    changed = true;
  }
  // The layout of this replot may still move the axes: once more with it.
  if (changed) plot->replot(QCustomPlot::rpQueuedReplot);
}

void DiffPanel::fitReport() {
  QTextDocument* document = report_->document();
  document->setTextWidth(report_->viewport()->width());
  const int text = static_cast<int>(std::ceil(document->size().height())) + 2 * report_->frameWidth() + 2;
  // As tall as its text, up to a fifth of a short panel (a Debug dock keeps
  // its plots) or two fifths of a tall one (Capture's shows the whole report); beyond
  // that it scrolls. A maximum only: the minimum stays small, so the report
  // never makes the window grow.
  const int room = std::max(60, height() > 360 ? height() * 2 / 5 : height() / 5);
  // Capped, it ends after the last line that fits whole: a line cut through
  // its glyphs reads as garbage, a scroll bar says there is more. A maximum
  // only (the minimum stays small, so a zoom and back restores the docks'
  // sizes); the plots' area asks for no height of its own, so the report gets
  // this height before the plots, which scroll.
  const int shown = text <= room ? std::max(text, 48) : wholeLinesHeight(room);
  report_->setMaximumHeight(shown);
  report_->setMinimumHeight(std::min(48, shown));  // a first line taller than 48 px (200%) is never cut below it
}

int DiffPanel::wholeLinesHeight(int room) const {
  // The viewport ends exactly at the bottom of the last line that fits: any
  // more (a bottom margin) shows the top of the next line's glyphs.
  QTextDocument* document = report_->document();
  const int frame = 2 * report_->frameWidth();
  const double limit = room - frame;
  double fit = document->documentMargin();  // the bottom of the last whole line, in the document
  for (QTextBlock block = document->begin(); block.isValid(); block = block.next()) {
    const QTextLayout* layout = block.layout();
    const double top = document->documentLayout()->blockBoundingRect(block).top();
    for (int i = 0; layout && i < layout->lineCount(); ++i) {
      const QTextLine line = layout->lineAt(i);
      const double bottom = top + line.y() + line.height();
      // The first line shows whatever the room: the box never shows nothing.
      if (bottom > limit && fit > document->documentMargin()) return static_cast<int>(std::lround(fit)) + frame;
      fit = bottom;
    }
  }
  return static_cast<int>(std::lround(fit)) + frame;
}

void DiffPanel::setOnScreen(bool on_screen) {
  if (on_screen == on_screen_) return;
  on_screen_ = on_screen;
  if (on_screen_) scheduleRefresh();
}

QString DiffPanel::auditCaption() const { return audit_caption_->text(); }

// The grid's caption, kept in `label` (auditCaption()) and shown as the grid's axis label.
static void showAuditCaption(QLabel* label, QCustomPlot* plot, const QString& caption) {
  label->setText(caption);
  plot->setProperty("auditAxisTitle", QObject::tr("physical row \u00b7 %1").arg(caption));
  plot->replot(QCustomPlot::rpQueuedReplot);  // elided to the plot's width just before it draws (fitAuditCaption)
}

QString DiffPanel::auditAxisTitle() const { return audit_plot_->property("auditAxisTitle").toString(); }

void DiffPanel::fitAuditCaption() {
  // A centred axis label wider than the grid is cut at both ends: elide it
  // to the grid's width instead (the hover under the grid shows all of it).
  const QString full = auditAxisTitle();
  // The grid's width at the plot's current size: its margins are the last
  // layout's (a resize lays out again only after this runs).
  const QCPAxisRect* grid = audit_plot_->axisRect();
  const int right_margin = audit_plot_->plotLayout()->outerRect().right() - grid->right();
  const int room = std::max(40, audit_plot_->viewport().width() - grid->left() - right_margin);
  const QString shown = QFontMetrics(audit_plot_->xAxis->labelFont()).elidedText(full, Qt::ElideRight, room);
  if (audit_plot_->xAxis->label() != shown) audit_plot_->xAxis->setLabel(shown);
}

void DiffPanel::followCursor(const SessionSnapshot* snapshot, const CacheAudit* shown) {
  const Cursor& cursor = context().cursor();
  const auto moment = [snapshot](const Moment& m) {
    return QObject::tr("%1 %2").arg(roundName(snapshot, m.round), QString::fromUtf8(phaseName(m.phase)));
  };
  if (shown) {
    QString caption = tr("Audit of the %1 cache after %2").arg(cacheName(shown->cache), moment(shown->moment));
    if (snapshot->from_capture) caption += tr(" (the capture's check, wherever the cursor is)");
    showAuditCaption(audit_caption_, audit_plot_, caption);
    return;
  }
  if (!snapshot || !cursor.valid()) {
    showAuditCaption(audit_caption_, audit_plot_, tr("Audit: no session"));
    return;
  }
  const bool live = snapshot->use_cache && !snapshot->from_capture && !snapshot->replay_only;
  const Moment at = cursor.moment();
  if (live && on_screen_) {
    const bool asked = requested_ && requested_moment_.round == at.round && requested_moment_.phase == at.phase;
    if (!asked) {
      requested_ = true;
      requested_moment_ = at;
      emit auditRequested(at);
    }
    showAuditCaption(audit_caption_, audit_plot_, tr("Auditing %1\u2026").arg(moment(at)));
  } else if (!snapshot->use_cache) {
    showAuditCaption(audit_caption_, audit_plot_, tr("Audit: the cache is off in this session, there is no cache to audit"));
  } else if (snapshot->from_capture) {
    // Audit at cursor is off for a capture: its check audits once, where a call went wrong.
    showAuditCaption(audit_caption_, audit_plot_,
                     tr("no audit: no call broke the contract"));
  } else {
    showAuditCaption(audit_caption_, audit_plot_, tr("No audit of %1 yet: Audit at cursor audits there").arg(moment(at)));
  }
}

const CacheAudit* DiffPanel::shownAudit() const {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot) return nullptr;
  const CacheRole mine = context().cursor().cache;
  const CacheRole other = mine == CacheRole::Target ? CacheRole::Drafter : CacheRole::Target;
  const CacheAudit* divergence = snapshot->diff && snapshot->diff->audit_at_divergence ? &*snapshot->diff->audit_at_divergence : nullptr;
  if (snapshot->from_capture) {  // the check's moment, whatever the cursor
    if (snapshot->audit(mine)) return snapshot->audit(mine).get();
    if (snapshot->audit(other)) return snapshot->audit(other).get();
    return divergence;
  }
  const Moment at = context().cursor().moment();
  const auto of = [&](const CacheAudit* audit) {
    return audit && audit->moment.round == at.round && audit->moment.phase == at.phase ? audit : nullptr;
  };
  if (const CacheAudit* audit = of(snapshot->audit(mine).get())) return audit;
  if (const CacheAudit* audit = of(snapshot->audit(other).get())) return audit;
  return of(divergence);
}

Cursor DiffPanel::rootCauseCursor() const {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || !snapshot->diff || !snapshot->diff->root_cause) return Cursor{};
  const RootCause& cause = *snapshot->diff->root_cause;
  Cursor cursor = context().cursor();
  cursor.round = cause.round;
  cursor.phase = cause.phase;
  cursor.cache = cause.cache;
  cursor.layer = cause.layers.empty() ? 0 : cause.layers.front();
  cursor.row = cause.rows.empty() ? -1 : cause.rows.front();
  cursor.entry = cause.verdicts.empty() ? -1 : cause.verdicts.front().entry;
  if (!cause.verdicts.empty()) cursor.position = cause.verdicts.front().position;
  if (!cause.verdicts.empty() && cause.verdicts.front().max_abs_dk) cursor.head = cause.verdicts.front().worst_head;
  return cursor;
}

Cursor DiffPanel::badCellCursor() const {
  Cursor cursor = context().cursor();
  const SessionSnapshot* shown = context().snapshot();
  const bool from_diff = shown && shown->diff && shown->diff->audit_at_divergence && shown->diff->audit_at_divergence->firstBad();
  const CacheAudit* audit = from_diff ? &*shown->diff->audit_at_divergence : shownAudit();
  if (const RowVerdict* bad = audit ? audit->firstBad() : nullptr) {
    cursor.round = audit->moment.round;
    cursor.phase = audit->moment.phase;
    cursor.cache = audit->cache;
    cursor.layer = bad->layer;
    cursor.head = bad->worst_head;
    cursor.row = bad->row;
    cursor.entry = bad->entry;
    cursor.position = bad->position;
    return cursor;
  }
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || !snapshot->diff || !snapshot->diff->first_divergence) return Cursor{};
  const FirstDivergence& first = *snapshot->diff->first_divergence;
  cursor.round = first.round;
  cursor.phase = first.phase;
  cursor.cache = first.cache;
  cursor.position = first.position;
  cursor.layer = first.layer.value_or(cursor.layer);
  cursor.head = first.head.value_or(cursor.head);
  cursor.row = first.row.value_or(-1);
  cursor.entry = -1;
  return cursor;
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
  const DiffReport* diff = snapshot && snapshot->diff ? snapshot->diff.get() : nullptr;
  showReport(snapshot, diff);
  showPositions(diff);
  const CacheAudit* audit = shownAudit();
  showAudit(audit);
  followCursor(snapshot, audit);
  go_root_->setEnabled(rootCauseCursor().valid());
  go_bad_->setEnabled(badCellCursor().valid());
  // A capture's audit is its check (shown); live sessions audit at the cursor.
  audit_->setEnabled(auditable());
  run_->setEnabled(snapshot && !snapshot->replay_only);
}

bool DiffPanel::auditable() const {
  const SessionSnapshot* snapshot = context().snapshot();
  return snapshot && snapshot->use_cache && !snapshot->from_capture && context().cursor().valid();
}

void DiffPanel::showReport(const SessionSnapshot* snapshot, const DiffReport* diff) {
  QString html;
  if (!diff) {
    // Run diff is off for a replayed file: the text names only what can be done.
    html = !snapshot ? tr("no session")
           : snapshot->replay_only
               ? tr("This trace was saved without a diff, and a replayed trace cannot be rerun: press <b>Start</b> "
                    "in the Session panel to run its settings live, and diff them there.")
               : tr("No diff for this session yet: <b>Run diff</b> restarts it with the current settings and finds "
                    "the first cache operation that broke the contract.");
  } else {
    // The explanation leads: symptom and cause in one sentence (it contains root_cause.what),
    // a size relative to the panel's font so presenter zoom scales it too.
    QString sentence = QString::fromStdString(diff->explanation()).toHtmlEscaped();
    if (!sentence.isEmpty()) sentence[0] = sentence[0].toUpper();
    const QString colour = diff->root_cause ? QStringLiteral("#b00000") : QStringLiteral("#206020");
    html = QStringLiteral("<p style='margin:0'><span style='font-size:large; color:%1'><b>%2</b></span></p>").arg(colour, sentence);
    if (diff->root_cause) {
      const RootCause& cause = *diff->root_cause;
      const auto& events = snapshot->events.events();
      const bool known = cause.event_index >= 0 && cause.event_index < static_cast<int64_t>(events.size());
      const std::string call = known ? events[static_cast<size_t>(cause.event_index)].call : std::string();
      if (!call.empty()) {
        html += tr("<p style='margin:2px 0'>In the engine's calls: <b>%1</b> (%2).</p>")
                    .arg(QString::fromStdString(call).toHtmlEscaped(), QString::fromUtf8(cacheEventKindName(cause.operation)));
      }
      html += tr("<p style='margin:2px 0'>Root cause: <b>%1 %2 %3 (%4)</b>, layers %5; expected %6 rows, found %7.</p>")
                  .arg(roundName(snapshot, cause.round))
                  .arg(cacheName(cause.cache), QString::fromUtf8(phaseName(cause.phase)),
                       QString::fromUtf8(cacheEventKindName(cause.operation)))
                  .arg(QString::fromStdString([&] {
                    std::string layers;
                    for (int64_t l : cause.layers) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
                    return layers;
                  }()))
                  .arg(cause.expected_rows)
                  .arg(cause.actual_rows);
    }
    if (snapshot->from_capture) {
      html += tr("<p style='margin:2px 0'>%1 &middot; %2 logit rows match the reference, %3 diverge%4</p>")
                  .arg(QString::fromStdString(snapshot->options_summary).toHtmlEscaped())
                  .arg(diff->agree)
                  .arg(diff->divergent)
                  .arg(diff->divergent ? tr(" (max |\u0394 log p| %1; the check stops at the first)").arg(diff->max_abs_logit_diff, 0, 'g', 3)
                                       : QString());
    } else {
      html += tr("<p style='margin:2px 0'>fault <b>%1</b> &middot; %2 agree, %3 float noise, %4 divergent; max |\u0394 logit| %5</p>")
                  .arg(QString::fromStdString(snapshot->fault).toHtmlEscaped())
                  .arg(diff->agree)
                  .arg(diff->noise)
                  .arg(diff->divergent)
                  .arg(diff->max_abs_logit_diff, 0, 'g', 3);
    }
  }
  // What could not be checked (a capture), or what a trace's file named beyond its record.
  for (const std::string& note : snapshot ? snapshot->notes : std::vector<std::string>{}) {
    html += QStringLiteral("<p style='margin:2px 0; color:#805000'>%1</p>").arg(QString::fromStdString(note).toHtmlEscaped());
  }
  if (const CacheAudit* audit = shownAudit()) html += QStringLiteral("<p style='margin:2px 0'>") + auditSummary(*audit) + QStringLiteral("</p>");
  if (diff && !snapshot->from_capture) html += faultExplanation(snapshot->fault);
  report_->setHtml(html);
  fitReport();
}

QString DiffPanel::auditSummary(const CacheAudit& audit) const {
  const SessionSnapshot& snapshot = *context().snapshot();
  QString text = tr("audit of the %1 cache after %2 %3 (%4): ")
                     .arg(cacheName(audit.cache))
                     .arg(roundName(&snapshot, audit.moment.round))
                     .arg(QString::fromUtf8(phaseName(audit.moment.phase)))
                     .arg(audit.values_checked ? tr("identities and values") : tr("identities only"));
  if (const RowVerdict* bad = audit.firstBad()) {
    text += tr("<span style='color:#c00'>%1 wrong rows; first: layer %2 row %3 %4 '%5' (position %6)</span>")
                .arg(audit.rows.size())
                .arg(bad->layer)
                .arg(bad->row)
                .arg(QString::fromUtf8(rowStateName(bad->state)))
                .arg(displayToken(snapshot.tokenText(bad->token)).toHtmlEscaped())
                .arg(bad->position);
  } else {
    text += tr("clean (max |\u0394| %1)").arg(audit.max_value_error, 0, 'g', 3);
  }
  const Cursor& cursor = context().cursor();
  // Only where Audit at cursor is on (a capture's audit is its check's).
  if (auditable() && (cursor.round != audit.moment.round || cursor.phase != audit.moment.phase)) {
    text += tr(" &middot; <i>the cursor is at round %1 %2: Audit at cursor to audit there</i>")
                .arg(cursor.round)
                .arg(QString::fromUtf8(phaseName(cursor.phase)));
  }
  return text;
}

void DiffPanel::showPositions(const DiffReport* diff) {
  positions_->clearItems();
  QVector<double> keys[2][3], values[2][3], kl_keys, kl_values;
  for (const PositionDiff& point : diff ? diff->positions : std::vector<PositionDiff>{}) {
    const int c = point.cache == CacheRole::Target ? 0 : 1;
    const int v = static_cast<int>(point.verdict);
    keys[c][v] << static_cast<double>(point.position);
    values[c][v] << std::max(point.max_abs_logit_diff, kFloor);
    if (c == 0) {
      kl_keys << static_cast<double>(point.position);
      kl_values << std::max(point.kl, kFloor);
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
  const auto vertical = [&](double x, const QPen& pen) {
    auto* line = new QCPItemStraightLine(positions_);
    line->point1->setCoords(x, 1);
    line->point2->setCoords(x, 2);
    line->setPen(pen);
  };
  if (context().cursor().position >= 0) vertical(context().cursor().position, QPen(Palette::selection(), 1));
  if (diff && diff->first_divergence) {
    const FirstDivergence& first = *diff->first_divergence;
    vertical(first.position, QPen(Palette::pruned(), 2, Qt::DashLine));
    auto* label = new QCPItemText(positions_);
    label->position->setTypeX(QCPItemPosition::ptPlotCoords);  // beside the divergence line, at the top
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(first.position, 0.02);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setBrush(QColor(255, 255, 255, 200));
    label->setText(tr(" diverged"));  // the report says where and why
    label->setColor(Palette::pruned());
  }
  // A capture's check counts the logit rows it compared but keeps the
  // |delta| of the first divergent one only: rows counted and no point to
  // draw is said in the plot, so empty axes never read as "nothing compared".
  const int64_t unplotted = diff ? diff->agree + diff->divergent - static_cast<int64_t>(diff->positions.size()) : 0;
  plot_note_.clear();
  if (diff && diff->mode == "capture" && unplotted > 0) {
    // Short lines: the note sits in a small plot and may spill over its axes, never past the widget.
    plot_note_ = diff->positions.empty()
                     ? tr("%1 logit rows compared,\nall within tolerance;\nthe check keeps no\nper-row |\u0394| to plot").arg(diff->agree)
                     : tr("%1 rows before it within\ntolerance (not kept to plot)").arg(diff->agree);
    auto* note = new QCPItemText(positions_);
    note->setObjectName(QStringLiteral("diffPlotNote"));
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, diff->positions.empty() ? 0.5 : 0.85);
    note->setPositionAlignment(Qt::AlignCenter);
    note->setTextAlignment(Qt::AlignCenter);
    note->setText(plot_note_);
    note->setClipToAxisRect(false);
    note->setColor(QColor(32, 96, 32));
    note->setPadding(QMargins(6, 4, 6, 4));
    note->setBrush(QColor(255, 255, 255, 220));
  }
  positions_->replot(QCustomPlot::rpQueuedReplot);
}

void DiffPanel::showAudit(const CacheAudit* audit) {
  audit_plot_->clearItems();
  QCPColorMapData* data = audit_map_->data();
  const int layers = audit ? static_cast<int>(audit->error.size()) : 0;
  int cols = 0;
  for (int l = 0; l < layers; ++l) cols = std::max(cols, static_cast<int>(audit->error[static_cast<size_t>(l)].size()));
  for (const RowVerdict& v : audit ? audit->rows : std::vector<RowVerdict>{}) cols = std::max(cols, static_cast<int>(v.row) + 1);
  if (layers == 0 || cols == 0) {
    // Nothing of this moment: no grid at all (a cleared map paints one flat colour that reads as data).
    data->clear();
    audit_map_->setVisible(false);
    audit_plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  audit_map_->setVisible(true);
  data->setSize(cols, layers);
  data->setRange(QCPRange(0, std::max(cols - 1, 1)), QCPRange(0, std::max(layers - 1, 1)));
  data->fill(std::nan(""));
  double high = -9;
  for (int l = 0; l < layers; ++l) {
    const auto& errors = audit->error[static_cast<size_t>(l)];
    for (int r = 0; r < static_cast<int>(errors.size()); ++r) {
      const double e = errors[static_cast<size_t>(r)];
      if (!std::isfinite(e)) continue;  // identity broken (its verdict is drawn) or not compared
      const double shown = std::log10(std::max(e, kFloor));
      data->setCell(r, l, shown);
      high = std::max(high, shown);
    }
  }
  // Below 1e-5 is float noise (the audit's tolerance is 1e-4 + 1e-3 relative): drawn white.
  audit_map_->setDataRange(QCPRange(-5.0, std::max(high, -2.0)));
  // Every wrong row in its verdict's colour, up to a bound: one item per row,
  // and a hostile capture's breach may span a million rows (minutes of layout).
  constexpr size_t kMaxOutlinedRows = 4096;
  const size_t outlined = std::min(audit->rows.size(), kMaxOutlinedRows);
  for (size_t i = 0; i < outlined; ++i) {
    const RowVerdict& v = audit->rows[i];
    cellRect(audit_plot_, static_cast<double>(v.row), static_cast<double>(v.layer), QPen(Qt::black, 0.5),
             Palette::rowState(v.state));
  }
  if (outlined < audit->rows.size()) {
    auto* note = new QCPItemText(audit_plot_);
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, 0.5);
    note->setText(tr("the first %L1 of %L2 wrong rows outlined").arg(outlined).arg(audit->rows.size()));
    note->setBrush(QColor(255, 255, 255, 220));
    note->setPadding(QMargins(6, 4, 6, 4));
  }
  const Cursor& cursor = context().cursor();
  if (cursor.cache == audit->cache && cursor.row >= 0) {
    cellRect(audit_plot_, static_cast<double>(cursor.row), static_cast<double>(cursor.layer), QPen(Palette::selection(), 2.5),
             Qt::NoBrush);
  }
  audit_plot_->xAxis->setRange(-0.5, cols - 0.5);
  audit_plot_->yAxis->setRange(-0.5, layers - 0.5);
  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(1);
  audit_plot_->yAxis->setTicker(ticker);
  audit_plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString DiffPanel::auditCellText(const QPointF& at) const {
  const CacheAudit* audit = shownAudit();
  if (!audit || !audit_map_->visible()) return {};
  const auto row = static_cast<int64_t>(std::lround(audit_plot_->xAxis->pixelToCoord(at.x())));
  const auto layer = static_cast<int64_t>(std::lround(audit_plot_->yAxis->pixelToCoord(at.y())));
  if (row < 0 || layer < 0 || layer >= static_cast<int64_t>(audit->error.size())) return {};
  const auto& errors = audit->error[static_cast<size_t>(layer)];
  QString text = tr("%1 cache, layer %2, physical row %3").arg(cacheName(audit->cache)).arg(layer).arg(row);
  for (const RowVerdict& v : audit->rows) {
    if (v.layer == layer && v.row == row) {
      return text + tr(": %1 (position %2, worst kv head %3); click to put the cursor there")
                        .arg(Palette::rowStateLabel(v.state))
                        .arg(v.position)
                        .arg(v.worst_head);
    }
  }
  if (row >= static_cast<int64_t>(errors.size())) return {};
  const double e = errors[static_cast<size_t>(row)];
  if (!std::isfinite(e)) return text + tr(": not compared (no reference model for its values)");
  return text + tr(": largest |\u0394| between the cached K/V and a recompute %1%2")
                    .arg(e, 0, 'g', 3)
                    .arg(e < 1e-5 ? tr(" (float noise)") : QString());
}

void DiffPanel::onAuditClick(QMouseEvent* event) {
  const CacheAudit* audit = shownAudit();
  if (!audit) return;
  const auto row = static_cast<int64_t>(std::lround(audit_plot_->xAxis->pixelToCoord(event->position().x())));
  const auto layer = static_cast<int64_t>(std::lround(audit_plot_->yAxis->pixelToCoord(event->position().y())));
  if (row < 0 || layer < 0 || layer >= static_cast<int64_t>(audit->error.size())) return;
  Cursor cursor = context().cursor();
  cursor.round = audit->moment.round;
  cursor.phase = audit->moment.phase;
  cursor.cache = audit->cache;
  cursor.layer = layer;
  cursor.row = row;
  cursor.entry = -1;
  for (const RowVerdict& v : audit->rows) {
    if (v.layer == layer && v.row == row) cursor.head = v.worst_head;
  }
  context().setCursor(cursor);
}

}  // namespace kvscope::ui
