#include "ui/widgets/PagedPoolView.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QRadioButton>
#include <QScrollArea>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "ui/widgets/BlockTableStrip.h"
#include "ui/widgets/DisplayToken.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/PoolBlockGrid.h"
#include "ui/widgets/RoundName.h"
#include "ui/widgets/WrappedLegend.h"

namespace kvscope::ui {

namespace {

QString swatch(const QColor& color, const QString& name) {
  // The swatch stays with its name when the legend wraps.
  return QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2 ")
      .arg(color.name(), QString(name).replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
}

}  // namespace

PagedPoolView::PagedPoolView(QWidget* parent) : QWidget(parent) {
  hint_ = new QLabel(tr("<p>This session keeps its K/V <b>contiguous</b>: one tensor per layer, no block pool to "
                        "show.</p><p>To see a paged pool, start a session with the paged layout: the Session panel's "
                        "<i>Cache layout</i> <tt>paged:4</tt>, or <tt>kvscope --cache-layout paged:4</tt> (with "
                        "several <tt>--prompt</tt> for a batch that shares one pool).</p>"));
  hint_->setObjectName(QStringLiteral("poolHint"));
  hint_->setWordWrap(true);
  hint_->setAlignment(Qt::AlignCenter);
  hint_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  caption_ = new QLabel;
  caption_->setObjectName(QStringLiteral("poolCaption"));
  caption_->setWordWrap(true);
  caption_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  target_button_ = new QRadioButton(tr("Target pool"));
  drafter_button_ = new QRadioButton(tr("Drafter pool"));
  target_button_->setChecked(true);
  auto* group = new QButtonGroup(this);
  group->addButton(target_button_, 0);
  group->addButton(drafter_button_, 1);
  connect(group, &QButtonGroup::idClicked, this,
          [this](int id) { setShownCache(id == 0 ? CacheRole::Target : CacheRole::Drafter); });
  auto* header = new QHBoxLayout;
  header->addWidget(target_button_);
  header->addWidget(drafter_button_);
  header->addSpacing(8);
  header->addWidget(caption_, 1);

  grid_ = new PoolBlockGrid;
  grid_->setObjectName(QStringLiteral("poolGrid"));
  strip_title_ = new QLabel;
  strip_title_->setWordWrap(true);
  strip_title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  strip_ = new BlockTableStrip;
  strip_->setObjectName(QStringLiteral("poolTableStrip"));
  legend_ = new WrappedLegend(QString());
  legend_->setObjectName(QStringLiteral("poolLegend"));
  connect(grid_, &PoolBlockGrid::hoverText, this, &PagedPoolView::hoverText);

  // The grid and the strip scroll together when a large pool outgrows the panel.
  auto* content = new QWidget;
  auto* content_layout = new QVBoxLayout(content);
  content_layout->setContentsMargins(0, 0, 0, 0);
  content_layout->addWidget(grid_);
  content_layout->addSpacing(6);
  content_layout->addWidget(strip_title_);
  content_layout->addWidget(strip_);
  content_layout->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidget(content);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);

  auto* pool_page = new QWidget;
  auto* pool_layout = new QVBoxLayout(pool_page);
  pool_layout->setContentsMargins(2, 2, 2, 2);
  pool_layout->addLayout(header);
  pool_layout->addWidget(scroll, 1);
  pool_layout->addWidget(legend_);

  stack_ = new QStackedWidget;
  stack_->addWidget(hint_);
  stack_->addWidget(pool_page);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stack_);
}

bool PagedPoolView::showingHint() const { return stack_->currentWidget() == hint_; }

void PagedPoolView::show(std::shared_ptr<const SessionSnapshot> snapshot, std::optional<Moment> moment) {
  snapshot_ = std::move(snapshot);
  moment_ = moment;
  redraw();
}

std::shared_ptr<const PoolView> PagedPoolView::shownPool() {
  const SessionSnapshot* s = snapshot_.get();
  const auto same_moment = [](const std::optional<Moment>& a, const std::optional<Moment>& b) {
    return a.has_value() == b.has_value() && (!a || (a->round == b->round && a->phase == b->phase));
  };
  const bool same_snapshot = !built_.snapshot.owner_before(snapshot_) && !snapshot_.owner_before(built_.snapshot);
  if (built_.pool && same_snapshot && built_.cache == cache_ && same_moment(built_.moment, moment_)) return built_.pool;
  std::shared_ptr<const PoolView> pool = moment_ ? poolAt(*s, cache_, *moment_) : s->pool(cache_);
  built_ = {snapshot_, cache_, moment_, pool};
  return pool;
}

QString PagedPoolView::captionText(const PoolView& pool) const {
  const SessionSnapshot* s = snapshot_.get();
  QString when;
  if (pool.moment) {
    when = tr("The pool just after %1 %2").arg(roundName(s, pool.moment->round), QString::fromUtf8(phaseName(pool.moment->phase)));
    if (pool.before_log) {
      when += tr(" (its log dropped the operations of that time: drawn as of the oldest it keeps)");
    }
  } else {
    when = s->lastRound() >= 0 ? tr("The pool as the run left it (%1)").arg(roundName(s, s->lastRound()))
                               : tr("The pool as the run left it");
  }
  return tr("%1: %2 blocks of %3 rows, %4 free; %5 sequence(s) share it. Hover a block for its rows and its last "
            "log entry.")
      .arg(when)
      .arg(pool.blocks.size())
      .arg(pool.block_size)
      .arg(pool.freeBlocks())
      .arg(pool.tables.size());
}

void PagedPoolView::setShownCache(CacheRole cache) {
  cache_ = cache;
  (cache == CacheRole::Target ? target_button_ : drafter_button_)->setChecked(true);
  redraw();
}

QString PagedPoolView::legendHtml(const PoolView& pool) const {
  QString html;
  for (const PoolSequenceTable& table : pool.tables) {
    html += swatch(Palette::sequence(table.sequence), tr("sequence %1").arg(table.sequence));
  }
  html += swatch(Palette::freeBlock(), tr("free"));
  html += tr("&nbsp; <b>framed</b>:&nbsp;the&nbsp;shown&nbsp;sequence's&nbsp;blocks ");
  html += QStringLiteral("<span style='color:%1'>&#9638;</span>&nbsp;%2")
              .arg(Palette::dangling().name(),
                   tr("dangling: freed but still mapped (the sequence reads a block the pool may have given away)"));
  return html;
}

void PagedPoolView::redraw() {
  const SessionSnapshot* s = snapshot_.get();
  const bool target_paged = s && s->target_pool, drafter_paged = s && s->drafter_pool;
  if (!target_paged && !drafter_paged) {
    stack_->setCurrentWidget(hint_);
    grid_->setPool(nullptr, 0);
    strip_->setTable(nullptr, 0);
    return;
  }
  // A pool that is not there cannot be shown: fall back to the other.
  if (cache_ == CacheRole::Target && !target_paged) cache_ = CacheRole::Drafter;
  if (cache_ == CacheRole::Drafter && !drafter_paged) cache_ = CacheRole::Target;
  target_button_->setEnabled(target_paged);
  drafter_button_->setEnabled(drafter_paged);
  (cache_ == CacheRole::Target ? target_button_ : drafter_button_)->setChecked(true);
  stack_->setCurrentWidget(stack_->widget(1));

  const std::shared_ptr<const PoolView> pool = shownPool();
  const int64_t shown = s->shown_sequence;
  grid_->setPool(pool, shown, [snapshot = snapshot_](int64_t token) {
    return displayToken(snapshot->tokenText(token));
  });
  strip_->setTable(pool, shown);
  const PoolSequenceTable* table = pool->table(shown);
  caption_->setText(captionText(*pool));
  strip_title_->setText(table ? tr("<b>Sequence %1's block table</b> (the Batch picker's sequence): logical block "
                                   "\u2192 pool block, %2 rows in %3 blocks")
                                    .arg(shown)
                                    .arg(table->rows)
                                    .arg(table->entries.size())
                              : tr("Sequence %1 maps no block of this pool.").arg(shown));
  legend_->setLegend(legendHtml(*pool));
}

}  // namespace kvscope::ui
