#include "ui/windows/TokenStripPanel.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>

#include "ui/widgets/LongText.h"
#include "ui/widgets/Palette.h"
#include "ui/widgets/RoundDraftsTable.h"

namespace kvscope::ui {

namespace {

QString topTokens(const SessionSnapshot& snapshot, int64_t round, int64_t query) {
  const auto found = snapshot.attention.find(round);
  if (found == snapshot.attention.end() || query >= static_cast<int64_t>(found->second->top_tokens.size())) return {};
  QString text = QObject::tr("target top tokens:");
  for (const auto& [id, p] : found->second->top_tokens[static_cast<size_t>(query)]) {
    text += QStringLiteral("<br>&nbsp;&nbsp;'%1' (%2) p=%3")
                .arg(displayToken(snapshot.tokenText(id)).toHtmlEscaped())
                .arg(id)
                .arg(static_cast<double>(p), 0, 'f', 4);
  }
  return text;
}

QString header(const SessionSnapshot& snapshot, int64_t position, int64_t id, const QString& what) {
  const std::string text = snapshot.tokenText(id);
  const QString elided = text.size() > kTokenShownBytes
                             ? QObject::tr("<br>(%L1 bytes, shown elided: right-click to copy the full text)").arg(text.size())
                             : QString();
  return QStringLiteral("<b>'%1'</b> id %2 &middot; position %3%4<br>%5")
      .arg(displayToken(text).toHtmlEscaped())
      .arg(id)
      .arg(position)
      .arg(elided, what);
}

}  // namespace

QString draftTooltip(const SessionSnapshot& snapshot, const RoundRecord& round, int64_t i, Phase phase) {
  const bool verified = phaseOrder(phase) >= phaseOrder(Phase::Verify);
  const bool judged = phaseOrder(phase) >= phaseOrder(Phase::Accept);
  const auto at = [](const std::vector<double>& values, int64_t index) {
    return index < static_cast<int64_t>(values.size()) ? values[static_cast<size_t>(index)] : -1.0;
  };
  const double q = at(round.q_draft, i), p = at(round.p_draft, i), u = at(round.uniforms, i);
  const auto shown = [](double value) {
    return value >= 0 ? QString::number(value, 'f', 4) : QObject::tr("(not computed yet)");
  };
  QString text = QStringLiteral("draft %1 of round %2<br>q(d) = %3 &middot; p(d) = %4")
                     .arg(i + 1)
                     .arg(round.index)
                     .arg(shown(q), verified ? shown(p) : QObject::tr("(verify pending)"));
  if (!judged || round.next_token < 0) return text + QObject::tr("<br>not judged yet (verify/accept pending)");
  const bool accepted = i < round.accepted;
  if (snapshot.greedy) {
    text += accepted ? QObject::tr("<br>accepted: equals the target's argmax")
                     : (i == round.accepted ? QObject::tr("<br><b>rejected</b>: the target's argmax differs")
                                            : QObject::tr("<br><b>discarded</b>: after the first rejection"));
  } else if (u >= 0) {
    const double ratio = q > 0 ? p / q : 0;
    text += QStringLiteral("<br>u = %1 vs min(1, p/q) = %2: %3")
                .arg(u, 0, 'f', 4)
                .arg(std::min(1.0, ratio), 0, 'f', 4)
                .arg(accepted ? QObject::tr("accepted") : QObject::tr("<b>rejected</b>"));
  } else if (!accepted) {
    text += QObject::tr("<br><b>discarded</b>: after the first rejection");
  }
  const QString top = topTokens(snapshot, round.index, i);
  return top.isEmpty() ? text : text + QStringLiteral("<br>") + top;
}

TokenStripPanel::TokenStripPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  strip_ = new TokenStripWidget;
  strip_->setObjectName(QStringLiteral("tokenStrip"));
  auto* scroll = new QScrollArea;
  scroll->setWidget(strip_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setMinimumHeight(28);  // the window must fit small screens; the strip scrolls
  auto swatch = [](const QColor& color, const QString& name, bool struck = false) {
    return QStringLiteral("<span style='background:%1'>&nbsp;%2%3%4&nbsp;</span>")
        .arg(color.name(), struck ? QStringLiteral("<s>") : QString(), name, struck ? QStringLiteral("</s>") : QString());
  };
  legend_ = new QLabel(swatch(Palette::prompt(), tr("prompt")) + QStringLiteral(" ") +
                       swatch(Palette::acceptedDraft(), tr("accepted draft")) + QStringLiteral(" ") +
                       swatch(Palette::correction(), tr("correction")) + QStringLiteral(" ") +
                       swatch(Palette::bonus(), tr("bonus")) + QStringLiteral(" ") +
                       swatch(Palette::rejected(), tr("rejected draft"), true) + QStringLiteral(" ") +
                       swatch(Palette::pending(), tr("draft, not judged yet")));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  legend_->setWordWrap(true);
  layout->addWidget(legend_);
  layout->addWidget(scroll, 1);
  drafts_caption_ = new QLabel;
  drafts_caption_->setObjectName(QStringLiteral("roundDraftsCaption"));
  drafts_ = new RoundDraftsTable;
  layout->addWidget(drafts_caption_);
  layout->addWidget(drafts_);
  drafts_caption_->hide();
  drafts_->hide();
  connect(strip_, &TokenStripWidget::positionClicked, this, &TokenStripPanel::positionRequested);
  connect(strip_, &TokenStripWidget::copyTextRequested, this, &TokenStripPanel::copyTokenText);
}

void TokenStripPanel::copyTokenText(int index) const {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || index < 0 || index >= strip_->items().size()) return;
  QGuiApplication::clipboard()->setText(QString::fromStdString(snapshot->tokenText(strip_->items()[index].token)));
}

void TokenStripPanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  showDraftsTable();
}

void TokenStripPanel::showEvent(QShowEvent* event) {
  ViewerPanel::showEvent(event);
  showDraftsTable();
}

void TokenStripPanel::showDraftsTable() {
  // Room for the strip's lines at their own size and the table under them:
  // a Debug dock a few lines tall keeps the strip alone (its tooltips say the same).
  const int line = fontMetrics().height();
  bool shown = round_has_drafts_ && isVisible() && height() >= 18 * line;
  if (shown && !drafts_filled_) {
    // The context as it is now: a new snapshot or cursor whose refresh is
    // still pending (ViewerPanel::scheduleRefresh) may have no such round.
    const SessionSnapshot* snapshot = context().snapshot();
    const Cursor& cursor = context().cursor();
    const RoundRecord* round =
        snapshot && cursor.valid() && cursor.round >= 1 ? snapshot->round(cursor.round) : nullptr;
    shown = round && !round->drafts.empty();
    if (shown) drafts_->showRound(*snapshot, *round, cursor.phase);
    drafts_filled_ = shown;
  }
  drafts_caption_->setVisible(shown);
  drafts_->setVisible(shown);
}

void TokenStripPanel::refresh() {
  QVector<TokenItem> items;
  const SessionSnapshot* snapshot = context().snapshot();
  round_has_drafts_ = false;
  drafts_filled_ = false;
  if (!snapshot || !context().cursor().valid()) {
    strip_->setItems(items);
    showDraftsTable();
    return;
  }
  const Cursor& cursor = context().cursor();
  const RoundRecord* round = cursor.round >= 1 ? snapshot->round(cursor.round) : nullptr;
  if (round && !round->drafts.empty()) {
    round_has_drafts_ = true;
    drafts_caption_->setText(tr("Round %1's drafts (gamma %2), as of its %3 phase:")
                                 .arg(round->index)
                                 .arg(round->gamma)
                                 .arg(QString::fromUtf8(phaseName(cursor.phase))));
  }
  showDraftsTable();
  const bool judged = round && phaseOrder(cursor.phase) >= phaseOrder(Phase::Accept) && round->next_token >= 0;

  const auto addRejected = [&] {
    for (int64_t i = round->accepted; i < static_cast<int64_t>(round->drafts.size()); ++i) {
      TokenItem item;
      const int64_t id = round->drafts[static_cast<size_t>(i)];
      item.text = displayToken(snapshot->tokenText(id));
      item.token = id;
      item.background = Palette::rejected();
      item.struck = true;
      item.position = round->start_length + i;
      item.tooltip = header(*snapshot, item.position, id, draftTooltip(*snapshot, *round, i, cursor.phase));
      items.push_back(item);
    }
  };

  for (size_t position = 0; position < snapshot->sequence.size(); ++position) {
    const int64_t emitted = snapshot->emitted_round[position];
    if (emitted > cursor.round || (emitted == cursor.round && !judged && emitted > 0)) break;
    const TokenOrigin origin = snapshot->origins[position];
    if (judged && emitted == cursor.round &&
        (origin == TokenOrigin::Correction || origin == TokenOrigin::Bonus)) {
      addRejected();
    }
    TokenItem item;
    const int64_t id = snapshot->sequence[position];
    item.text = displayToken(snapshot->tokenText(id));
    item.token = id;
    item.background = Palette::origin(origin);
    item.position = static_cast<qint64>(position);
    QString what = QStringLiteral("%1, round %2").arg(QString::fromUtf8(tokenOriginName(origin))).arg(emitted);
    if (const RoundRecord* from = emitted >= 1 ? snapshot->round(emitted) : nullptr) {
      const int64_t i = item.position - from->start_length;
      if (origin == TokenOrigin::AcceptedDraft) {
        what += QStringLiteral("<br>") + draftTooltip(*snapshot, *from, i, Phase::Prune);
      } else {
        what += from->bonus ? tr("<br>bonus: drawn from p(gamma+1) after all drafts were accepted")
                            : (snapshot->greedy ? tr("<br>correction: the target's argmax at the first rejection")
                                                : tr("<br>correction: drawn from norm(max(0, p - q))"));
        const QString top = topTokens(*snapshot, from->index, i);
        if (!top.isEmpty()) what += QStringLiteral("<br>") + top;
      }
    }
    item.tooltip = header(*snapshot, item.position, id, what);
    items.push_back(item);
  }
  // Drafts of the cursor round before acceptance: outlined, not judged yet.
  if (round && !judged) {
    for (size_t i = 0; i < round->drafts.size(); ++i) {
      TokenItem item;
      const int64_t id = round->drafts[i];
      item.text = displayToken(snapshot->tokenText(id));
      item.token = id;
      item.background = Palette::pending();
      item.pending = true;
      item.position = round->start_length + static_cast<int64_t>(i);
      item.tooltip = header(*snapshot, item.position, id, draftTooltip(*snapshot, *round, static_cast<int64_t>(i), cursor.phase));
      items.push_back(item);
    }
  }
  for (TokenItem& item : items) item.selected = item.position == cursor.position && !item.struck;
  strip_->setItems(std::move(items));
}

}  // namespace kvscope::ui
