#include "ui/windows/KvCachePanel.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QRadioButton>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "ui/widgets/ColorRangeControl.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/Palette.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

KvCachePanel::KvCachePanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  auto* k_button = new QRadioButton(tr("K"));
  auto* v_button = new QRadioButton(tr("V"));
  k_button->setChecked(true);
  kv_group_ = new QButtonGroup(this);
  kv_group_->addButton(k_button, 0);
  kv_group_->addButton(v_button, 1);
  range_ = new ColorRangeControl;
  auto* legend = new QLabel(QStringLiteral("<span style='background:%1'>&nbsp;&nbsp;</span> written this round "
                                           "<span style='background:%2'>&nbsp;&nbsp;</span> pruned this round (row faded)")
                                .arg(Palette::written().name(), Palette::pruned().name()));
  auto* controls = new QHBoxLayout;
  controls->addWidget(k_button);
  controls->addWidget(v_button);
  controls->addSpacing(12);
  controls->addWidget(range_);
  controls->addStretch(1);

  target_ = new KvHeatmapView(CacheRole::Target);
  drafter_ = new KvHeatmapView(CacheRole::Drafter);
  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(target_);
  splitter->addWidget(drafter_);
  hover_ = new QLabel(tr("Hover the heatmap for values; click a row for its history."));
  hover_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  history_ = new QTextBrowser;
  history_->setObjectName(QStringLiteral("entryHistory"));
  history_->setMaximumHeight(64);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(controls);
  layout->addWidget(splitter, 1);
  auto* status = new QHBoxLayout;
  status->addWidget(legend);
  status->addSpacing(12);
  status->addWidget(hover_, 1);
  hover_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addLayout(status);
  layout->addWidget(history_);

  connect(kv_group_, &QButtonGroup::idClicked, this, [this] { scheduleRefresh(); });
  connect(range_, &ColorRangeControl::rangeChanged, this, [this] { scheduleRefresh(); });
  for (KvHeatmapView* view : {target_, drafter_}) {
    connect(view, &KvHeatmapView::selectorsChanged, this, [this] { scheduleRefresh(); });
    connect(view, &KvHeatmapView::hoverText, hover_, &QLabel::setText);
    connect(view, &KvHeatmapView::entryClicked, this, [this](qint64 entry_index) {
      const SessionSnapshot* snapshot = this->context().snapshot();
      if (!snapshot || entry_index < 0 || entry_index >= static_cast<qint64>(snapshot->entries.size())) return;
      showEntry(entry_index);
      emit positionRequested(snapshot->entries[static_cast<size_t>(entry_index)].position);
    });
  }
}

bool KvCachePanel::showingValues() const { return kv_group_->checkedId() == 1; }

void KvCachePanel::setShowingValues(bool values) {
  kv_group_->button(values ? 1 : 0)->setChecked(true);
  scheduleRefresh();
}

void KvCachePanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  const ColorRange range = range_->range();
  target_->show(context().snapshotPtr(), context().cursor(), showingValues(), range);
  drafter_->show(context().snapshotPtr(), context().cursor(), showingValues(), range);
  range_->showAutofitRange(target_->shownLower(), target_->shownUpper());
  // A position selected anywhere (token strip, attention) shows its target entry's history.
  const qint64 position = context().cursor().position;
  if (snapshot && position >= 0 && position != followed_position_) {
    const CacheMatrix& matrix = target_->matrix();
    for (size_t r = matrix.entry_indices.size(); r-- > 0;) {
      if (snapshot->entries[static_cast<size_t>(matrix.entry_indices[r])].position == position) {
        shown_entry_ = matrix.entry_indices[r];
        break;
      }
    }
  }
  followed_position_ = position;
  if (snapshot && shown_entry_ >= 0 && shown_entry_ < static_cast<qint64>(snapshot->entries.size())) {
    showEntry(shown_entry_);
  } else if (!snapshot) {
    history_->clear();
    shown_entry_ = -1;
  }
}

void KvCachePanel::showEntry(qint64 entry_index) {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || entry_index < 0 || entry_index >= static_cast<qint64>(snapshot->entries.size())) return;
  shown_entry_ = entry_index;
  const LedgerEntry& entry = snapshot->entries[static_cast<size_t>(entry_index)];
  const int layer = entry.cache == CacheRole::Target ? target_->layer() : drafter_->layer();
  history_->setHtml(entryHistory(*snapshot, entry, layer));
}

QString KvCachePanel::entryHistory(const SessionSnapshot& snapshot, const LedgerEntry& entry, int layer) const {
  QString html = QStringLiteral("<b>%1 cache, position %2</b>: '%3' (id %4)<br>")
                     .arg(entry.cache == CacheRole::Target ? tr("Target") : tr("Drafter"))
                     .arg(entry.position)
                     .arg(displayToken(snapshot.tokenText(entry.token)).toHtmlEscaped())
                     .arg(entry.token);
  html += tr("born: round %1, %2 phase").arg(entry.born_round).arg(QString::fromUtf8(phaseName(entry.born_phase)));
  if (entry.died_round >= 0) {
    html += tr(" &middot; <span style='color:#c00'>removed: round %1, %2 phase, reason: %3</span>")
                .arg(entry.died_round)
                .arg(QString::fromUtf8(phaseName(entry.died_phase)))
                .arg(QString::fromUtf8(deathReasonName(entry.reason)));
  } else {
    html += tr(" &middot; alive");
  }
  if (entry.cache != CacheRole::Target) return html;
  // Attention it received in each verify pass while alive (layer shown, mean over heads and query rows).
  QStringList received;
  for (const auto& [round, attention] : snapshot.attention) {
    if (round < entry.born_round || (entry.died_round >= 0 && round > entry.died_round)) continue;
    if (entry.position >= attention->keys || layer >= static_cast<int>(attention->layers.size())) continue;
    double sum = 0, peak = 0;
    int64_t count = 0;
    for (int64_t h = 0; h < attention->heads; ++h) {
      for (int64_t q = 0; q < attention->queries; ++q) {
        if (attention->first_query_position + q < entry.position) continue;  // causal: cannot see it
        const double w = attention->at(layer, h, q, entry.position);
        sum += w;
        peak = std::max(peak, w);
        ++count;
      }
    }
    if (count > 0) received << QStringLiteral("r%1: %2 (max %3)").arg(round).arg(sum / count, 0, 'f', 3).arg(peak, 0, 'f', 3);
  }
  if (!received.isEmpty()) {
    html += tr("<br>attention received in verify passes (layer %1, mean over heads and queries): ").arg(layer) +
            received.join(QStringLiteral(", "));
  }
  return html;
}

}  // namespace kvscope::ui
