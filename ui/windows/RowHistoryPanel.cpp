#include "ui/windows/RowHistoryPanel.h"

#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QScrollBar>
#include <QSplitter>

#include "ui/context/RowLookup.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/RecurrentStatesView.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {

QString cacheName(CacheRole cache) { return cache == CacheRole::Target ? QObject::tr("Target") : QObject::tr("Drafter"); }

QString quotedToken(const SessionSnapshot& snapshot, int64_t token) {
  return QStringLiteral("'%1'").arg(displayToken(snapshot.tokenText(token)).toHtmlEscaped());
}

QString stateHtml(RowState state) {
  if (state == RowState::Ok) return QStringLiteral("ok");
  return QStringLiteral("<b style='color:%1'>%2</b>").arg(Palette::rowState(state).name(), QString::fromUtf8(rowStateName(state)));
}

QString momentLink(int64_t round, Phase phase) {
  return QStringLiteral("<a href='moment:%1:%2'>round %1 %3</a>")
      .arg(round)
      .arg(static_cast<int>(phase))
      .arg(QString::fromUtf8(phaseName(phase)));
}

}  // namespace

RowHistoryPanel::RowHistoryPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  text_ = new QTextBrowser;
  text_->setObjectName(QStringLiteral("rowHistory"));
  text_->setOpenLinks(false);
  recurrent_ = new RecurrentStatesView;
  split_ = new QSplitter(Qt::Vertical);
  auto* split = split_;
  split->addWidget(text_);
  split->addWidget(recurrent_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 2);  // a hybrid capture's states are what its bug is about
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(split);
  connect(text_, &QTextBrowser::anchorClicked, this, &RowHistoryPanel::onAnchor);
}

void RowHistoryPanel::onAnchor(const QUrl& url) {
  const QStringList parts = url.toString().split(QLatin1Char(':'));
  if (parts.size() != 3 || parts[0] != QStringLiteral("moment")) return;
  context().goToMoment({parts[1].toLongLong(), static_cast<Phase>(parts[2].toInt())});
}

void RowHistoryPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  const Cursor& cursor = context().cursor();
  if (snapshot != recurrent_of_) {  // refilled per snapshot, not per cursor move: the selection stays
    recurrent_->showStates(snapshot);
    recurrent_of_ = snapshot;
    // A hybrid capture's bug is in its states: give their table most of a short dock.
    if (recurrent_->isVisibleTo(this)) split_->setSizes({height() / 4, height() - height() / 4});
  }
  history_ = RowHistory{};
  if (!snapshot || !cursor.valid()) {
    text_->setHtml(tr("no session"));
    return;
  }
  if (cursor.entry < 0) {
    text_->setHtml(cursor.row >= 0 ? missingHtml(*snapshot, cursor)
                                   : tr("Click a cache row (KV Cache rows, Verify Attention keys, audit cells) or a "
                                        "token to see which cache operations made it and which one broke the contract."));
    return;
  }
  history_ = rowHistory(*snapshot, cursor.entry, cursor.layer);
  const int scroll = text_->verticalScrollBar() ? text_->verticalScrollBar()->value() : 0;
  text_->setHtml(identityHtml(*snapshot, cursor) + eventsHtml(cursor) + attentionHtml(*snapshot, cursor));
  if (text_->verticalScrollBar()) text_->verticalScrollBar()->setValue(scroll);
}

QString RowHistoryPanel::identityHtml(const SessionSnapshot& s, const Cursor& cursor) const {
  const LedgerEntry& e = s.entries[static_cast<size_t>(cursor.entry)];
  RowState now = RowState::Ok;
  for (const RowVerdict& v : rowVerdicts(s, e.cache, cursor.layer, cursor.moment())) {
    if (v.entry == cursor.entry) now = v.state;
  }
  QString html = tr("<b>%1 cache &middot; layer %2 &middot; %3</b> at round %4 %5<br>")
                     .arg(cacheName(e.cache))
                     .arg(cursor.layer)
                     .arg(cursor.row >= 0 ? tr("row %1").arg(cursor.row) : tr("not held at this moment"))
                     .arg(cursor.round)
                     .arg(QString::fromUtf8(phaseName(cursor.phase)));
  if (e.padding) {
    // A pad row is no token of the text: it has no position, and its rotary
    // position is whatever the padded layout gives it (docs/batching.md).
    html += tr("holds %1 (id %2), a pad row: padding before the prompt or after a shorter sequence's inputs, "
               "no position of the text (rotary position %3), which every forward's attention mask must hide; "
               "verdict here: %4<br>")
                .arg(quotedToken(s, e.token))
                .arg(e.token)
                .arg(e.rope_position)
                .arg(cursor.row >= 0 ? stateHtml(now) : QStringLiteral("-"));
  } else {
    html += tr("holds %1 (id %2) written for position %3, rotary position %4%5; verdict here: %6<br>")
                .arg(quotedToken(s, e.token))
                .arg(e.token)
                .arg(e.position)
                .arg(e.rope_position)
                .arg(e.rope_position != e.position ? tr(" <b style='color:#c00'>(rotated for the wrong position)</b>")
                                                   : QString())
                .arg(cursor.row >= 0 ? stateHtml(now) : QStringLiteral("-"));
  }
  html += tr("born %1").arg(momentLink(e.born_round, e.born_phase));
  html += e.died_round >= 0 ? tr(" &middot; removed %1 (%2)")
                                  .arg(momentLink(e.died_round, e.died_phase), QString::fromUtf8(deathReasonName(e.reason)))
                            : tr(" &middot; still held");
  return html;
}

QString RowHistoryPanel::missingHtml(const SessionSnapshot& s, const Cursor& cursor) const {
  for (const RowVerdict& v : rowVerdicts(s, cursor.cache, cursor.layer, cursor.moment())) {
    if (v.state != RowState::Missing || v.row != cursor.row) continue;
    return tr("<b>%1 cache &middot; layer %2 &middot; row %3</b> at round %4 %5: %6<br>the bookkeeping expects %7 "
              "(position %8) here and no row holds it.")
        .arg(cacheName(cursor.cache))
        .arg(cursor.layer)
        .arg(cursor.row)
        .arg(cursor.round)
        .arg(QString::fromUtf8(phaseName(cursor.phase)))
        .arg(stateHtml(RowState::Missing))
        .arg(quotedToken(s, v.token))
        .arg(v.position);
  }
  return tr("<b>%1 cache &middot; layer %2 &middot; row %3</b>: no row here at round %4 %5.")
      .arg(cacheName(cursor.cache))
      .arg(cursor.layer)
      .arg(cursor.row)
      .arg(cursor.round)
      .arg(QString::fromUtf8(phaseName(cursor.phase)));
}

QString RowHistoryPanel::eventsHtml(const Cursor& cursor) const {
  // Two lines per operation: what happened to this row, then the operation itself (and the fault's action).
  QString html = tr("<p style='margin:6px 0 2px 0'><b>Cache operations that touched it</b> (layer %1; click to go there)</p>")
                     .arg(history_.layer);
  if (!history_.blocks.empty()) {
    html += tr("<p style='margin:0 0 2px 0;color:#555'>A paged cache: beside each row, its pool block and offset, from "
               "the block table as the run left it (a row gone since shows its logical block only).</p>");
  }
  for (size_t i = 0; i < history_.events.size(); ++i) {
    const RowHistoryItem& e = history_.events[i];
    const bool at_cursor = e.moment.round == cursor.round && e.moment.phase == cursor.phase;
    const QString background = at_cursor ? QStringLiteral("#fff2c0") : (e.state != RowState::Ok ? QStringLiteral("#fde8e8") : QStringLiteral("#ffffff"));
    QString where = e.row_after >= 0 ? tr("row %1, %2").arg(e.row_after).arg(stateHtml(e.state)) : tr("gone");
    // A paged cache: the pool block and offset beside the row.
    if (i < history_.blocks.size() && history_.blocks[i]) {
      where += QStringLiteral(" &middot; <span style='color:#225'>%1</span>")
                   .arg(QString::fromStdString(rowBlockText(*history_.blocks[i])).toHtmlEscaped());
    }
    // Once a root cause is known, each later operation says it follows from it.
    const QString relation = e.root_cause_note.empty()
                                 ? QString()
                                 : QStringLiteral("<br><i style='color:#a00'>%1</i>")
                                       .arg(QString::fromStdString(e.root_cause_note).toHtmlEscaped());
    html += QStringLiteral("<table width='100%' cellspacing=0 cellpadding=2 style='background:%1'><tr><td>"
                           "%2: <b>%3</b> &rarr; %4<br><span style='color:#555'>%5</span>%6%7</td></tr></table>")
                .arg(background, momentLink(e.moment.round, e.moment.phase), QString::fromUtf8(rowEffectName(e.effect)), where,
                     QString::fromStdString(e.event_text).toHtmlEscaped(),
                     e.fault_action.empty() ? QString()
                                            : QStringLiteral("<br><b style='color:#c00'>fault: %1</b>")
                                                  .arg(QString::fromStdString(e.fault_action).toHtmlEscaped()),
                     relation);
  }
  return html;
}

QString RowHistoryPanel::attentionHtml(const SessionSnapshot& s, const Cursor& cursor) const {
  if (history_.cache != CacheRole::Target) return {};
  if (history_.attention.empty()) return tr("<p>It was not a key of any recorded verify pass.</p>");
  const int64_t kv_heads = std::max<int64_t>(s.target.kv_heads, 1);
  QString html = tr("<p style='margin:6px 0 2px 0'><b>Attention it received in verify passes</b> (layer %1; summed "
                    "over the queries, per query head; kv head %2's heads in bold)</p><table cellspacing=0 cellpadding=2 "
                    "border=1 style='border-collapse:collapse'>")
                     .arg(history_.layer)
                     .arg(cursor.head);
  for (const RowAttention& a : history_.attention) {
    const int64_t group = std::max<int64_t>(1, static_cast<int64_t>(a.per_head.size()) / kv_heads);
    QString heads;
    for (size_t h = 0; h < a.per_head.size(); ++h) {
      const QString value = QString::number(static_cast<double>(a.per_head[h]), 'f', 3);
      heads += static_cast<int64_t>(h) / group == cursor.head ? QStringLiteral(" <b>%1</b>").arg(value) : QStringLiteral(" ") + value;
    }
    html += QStringLiteral("<tr%1><td>%2</td><td>%3</td></tr>")
                .arg(a.round == cursor.round ? QStringLiteral(" style='background:#fff2c0'") : QString())
                .arg(momentLink(a.round, Phase::Verify))
                .arg(heads);
  }
  return html + QStringLiteral("</table>");
}

}  // namespace kvscope::ui
