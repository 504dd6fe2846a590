#include "ui/windows/KvCachePanel.h"

#include <QButtonGroup>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QRadioButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTextDocument>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

#include "ui/widgets/ColorRangeControl.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/PagedPoolView.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/WrappedLegend.h"

namespace kvscope::ui {

KvCachePanel::KvCachePanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  auto* k_button = new QRadioButton(tr("K"));
  auto* v_button = new QRadioButton(tr("V"));
  k_button->setChecked(true);
  kv_group_ = new QButtonGroup(this);
  kv_group_->addButton(k_button, 0);
  kv_group_->addButton(v_button, 1);
  range_ = new ColorRangeControl;
  // Wrapped, not cut (at 1280x720 the row-state keys past "stale" fell off the panel's edge),
  // in short words and keying only the verdicts drawn, so it stays one line beside the
  // controls where the KV dock is short (Capture); updateLegend() fills it.
  auto* legend = legend_ = new WrappedLegend(QString());
  legend->setObjectName(QStringLiteral("kvLegend"));
  legend->setToolTip(tr("The strips left of the rows: green, written this round; red, removed this round;\n"
                        "grey cross-hatched, evicted by a compression policy.\n"
                        "Rows are physical cache rows, labelled 'position token' (r:p when a row does not hold its own\n"
                        "position). Wrong rows are hatched in their verdict's colour; a missing row is a dashed line\n"
                        "where it belongs. Rows an eviction policy masked in the shown kv head are grey and cross-hatched\n"
                        "(they stay in the cache at their row, unread by that head; hover says which policy and round). Wheel: zoom rows around the pointer (Ctrl: dims); drag: pan; F or Home: fit.\n"
                        "When rows outnumber pixel lines, each line shows several rows (the value of largest |x|) and\n"
                        "carries the marks of any of them. The strip left of each heatmap is layer x kv head: click to go."));
  // Under the heatmaps: K/V, the colour range and the legend (vertical room is for rows).
  auto* controls = controls_ = new QHBoxLayout;
  controls->addWidget(k_button);
  controls->addWidget(v_button);
  controls->addSpacing(8);
  controls->addWidget(range_);
  controls->addSpacing(8);
  controls->addWidget(legend, 1);  // placeLegend() moves it under the controls when one line does not fit beside
  controls->addStretch(0);  // the controls keep to the left when the legend is under them

  target_ = new KvHeatmapView(CacheRole::Target);
  drafter_ = new KvHeatmapView(CacheRole::Drafter);
  updateLegend();
  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(target_);
  splitter->addWidget(drafter_);
  splitter->setToolTip(tr("Hover for values; click a row for its history."));

  auto* rows_page = new QWidget;
  auto* rows_layout = rows_layout_ = new QVBoxLayout(rows_page);
  rows_layout->setContentsMargins(0, 0, 0, 0);
  rows_layout->addWidget(splitter, 1);
  rows_layout->addLayout(controls);
  pool_ = new PagedPoolView;
  pool_->setObjectName(QStringLiteral("pagedPoolView"));
  // The rows stay the first tab: the pool only exists for a paged session.
  tabs_ = new QTabWidget;
  tabs_->setObjectName(QStringLiteral("kvTabs"));
  tabs_->setDocumentMode(true);
  tabs_->setTabPosition(QTabWidget::South);  // the heatmaps keep the top edge; the tabs sit with the controls
  tabs_->addTab(rows_page, tr("K/V rows"));
  tabs_->addTab(pool_, tr("Paged pool"));
  tabs_->setTabToolTip(1, tr("A paged session's block pool: blocks by owner sequence, free blocks, the shown sequence's "
                             "block table, dangling entries (docs/paged-cache.md)."));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(tabs_, 1);
  connect(tabs_, &QTabWidget::currentChanged, this, [this] { scheduleRefresh(); });
  connect(pool_, &PagedPoolView::hoverText, this, &KvCachePanel::hoverText);

  // The rows the Attention Step by Step panel's query reads, marked in the target view.
  connect(&context, &DebuggerContext::attentionFocusChanged, this,
          [this] { target_->setAttentionFocus(this->context().attentionFocus()); });
  connect(kv_group_, &QButtonGroup::idClicked, this, [this] { scheduleRefresh(); });
  connect(range_, &ColorRangeControl::rangeChanged, this, [this] { scheduleRefresh(); });
  for (KvHeatmapView* view : {target_, drafter_}) {
    connect(view, &KvHeatmapView::allHeadsToggled, this, [this] { scheduleRefresh(); });
    connect(view, &KvHeatmapView::hoverText, this, &KvCachePanel::hoverText);
    connect(view, &KvHeatmapView::layerHeadPicked, this,
            [this](CacheRole cache, int layer, int head) { this->context().setLayerHead(cache, layer, head); });
    connect(view, &KvHeatmapView::entryClicked, this, [this](qint64 entry) { this->context().selectEntry(entry); });
  }
}

bool KvCachePanel::showingValues() const { return kv_group_->checkedId() == 1; }

void KvCachePanel::setShowingValues(bool values) {
  kv_group_->button(values ? 1 : 0)->setChecked(true);
  scheduleRefresh();
}

void KvCachePanel::showPoolTab(bool pool) { tabs_->setCurrentWidget(pool ? static_cast<QWidget*>(pool_) : tabs_->widget(0)); }

bool KvCachePanel::showingPoolTab() const { return tabs_->currentWidget() == pool_; }

void KvCachePanel::refresh() {
  // The pool at the moment every panel shows (the pool as the run left it before any).
  const Cursor cursor = context().cursor();
  pool_->show(context().snapshotPtr(), cursor.valid() ? std::optional<Moment>(cursor.moment()) : std::nullopt);
  const ColorRange range = range_->range();
  target_->setAttentionFocus(context().attentionFocus());
  target_->show(context().snapshotPtr(), context().cursor(), showingValues(), range);
  drafter_->show(context().snapshotPtr(), context().cursor(), showingValues(), range);
  range_->showAutofitRange(target_->shownLower(), target_->shownUpper());
  updateLegend();
  placeLegend();  // the controls' width changes with the autofit range's text
}

void KvCachePanel::updateLegend() {
  QList<RowState> drawn;
  for (RowState state : {RowState::Stale, RowState::Missing, RowState::Duplicate, RowState::WrongPosition, RowState::WrongValues}) {
    if (target_->countState(state) > 0 || drafter_->countState(state) > 0) drawn << state;
  }
  const QString html = QStringLiteral("<span style='background:%1'>&nbsp;&nbsp;</span> written now "
                                      "<span style='background:%2'>&nbsp;&nbsp;</span> removed now "
                                      "<span style='background:%3'>&nbsp;&#9638;&nbsp;</span> evicted &nbsp; ")
                           .arg(Palette::written().name(), Palette::pruned().name(), Palette::evicted().name()) +
                       Palette::rowStateLegend(drawn);
  if (html == legend_shown_) return;
  legend_shown_ = html;
  legend_->setLegend(html);
  placeLegend();
}

void KvCachePanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  placeLegend();
}

void KvCachePanel::changeEvent(QEvent* event) {
  ViewerPanel::changeEvent(event);
  if (event->type() == QEvent::FontChange) QTimer::singleShot(0, this, &KvCachePanel::placeLegend);  // a zoom's widths
}

void KvCachePanel::placeLegend() {
  if (!rows_layout_) return;
  // One line beside K/V and the colour range when it fits there; else a row of its own under
  // them (at 150% on 1024x768, wrapped beside them it took four lines from the heatmaps).
  QTextDocument line;
  line.setDefaultFont(legend_->font());
  line.setDocumentMargin(0);
  line.setHtml(legend_->text());
  int controls = 0;
  for (int i = 0; i < controls_->count(); ++i) {
    if (controls_->itemAt(i)->widget() != legend_) controls += controls_->itemAt(i)->sizeHint().width() + controls_->spacing();
  }
  const bool beside = controls + static_cast<int>(std::ceil(line.idealWidth())) + 8 <= rows_layout_->geometry().width();
  const bool is_beside = controls_->indexOf(legend_) >= 0;
  if (beside == is_beside) return;
  if (beside) {
    rows_layout_->removeWidget(legend_);
    controls_->addWidget(legend_, 1);
  } else {
    controls_->removeWidget(legend_);
    rows_layout_->addWidget(legend_);
  }
}

}  // namespace kvscope::ui
