#include "ui/widgets/RecurrentStatesView.h"

#include <QHeaderView>
#include <QStringList>
#include <algorithm>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include "ui/widgets/DisplayToken.h"
#include "ui/widgets/Palette.h"

namespace kvscope::ui {

namespace {

enum Column { Call, Inputs, Which, Layer, Kind, Id, After, Folded, Verdict, Columns };

QString span(int64_t first, int64_t last) {
  return first == last ? QString::number(first) : QStringLiteral("%1-%2").arg(first).arg(last);
}

// "21 tokens at 0-20, last 'a' 'b' 'c'"; the tooltip lists every one.
QString foldedText(const SessionSnapshot& s, const RecurrentStateRow& state, QString* every) {
  const auto n = static_cast<int64_t>(state.folded_tokens.size());
  if (n == 0) return QObject::tr("nothing a recorded call fed");
  QStringList tokens;
  for (int64_t i = 0; i < n; ++i) {
    tokens << QStringLiteral("%1:'%2'").arg(state.folded_positions[static_cast<size_t>(i)])
                  .arg(displayToken(s.tokenText(state.folded_tokens[static_cast<size_t>(i)])));
  }
  *every = tokens.join(QLatin1Char(' '));
  QString text = QObject::tr("%1 tokens at %2").arg(n).arg(span(state.folded_positions.front(), state.folded_positions.back()));
  text += QObject::tr(", last %1").arg(tokens.mid(std::max<int>(0, static_cast<int>(n) - 3)).join(QLatin1Char(' ')));
  if (state.rejected_drafts_of >= 0) text += QObject::tr(" \u00b7 holds rejected drafts of call %1").arg(state.rejected_drafts_of);
  return text;
}

}  // namespace

RecurrentStatesView::RecurrentStatesView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("recurrentStates"));
  title_ = new QLabel(tr("<b>Recurrent states</b> (hybrid model): per call, each recurrent layer's conv and SSM "
                         "state it resumed from and the one it left. A call at position p must resume from the "
                         "state after p - 1 over the kept tokens; red: a state that breaks it."));
  title_->setWordWrap(true);
  breach_ = new QLabel;
  breach_->setObjectName(QStringLiteral("recurrentBreach"));
  breach_->setWordWrap(true);
  breach_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  table_ = new QTableWidget(0, Columns);
  table_->setObjectName(QStringLiteral("recurrentTable"));
  table_->setHorizontalHeaderLabels({tr("call"), tr("inputs at"), tr("state"), tr("layer"), tr("kind"), tr("id"),
                                     tr("after position"), tr("folded in"), tr("verdict")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(Folded, QHeaderView::Stretch);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(title_);
  layout->addWidget(breach_);
  layout->addWidget(table_, 1);
  setVisible(false);
}

void RecurrentStatesView::showStates(const SessionSnapshot* snapshot) {
  root_cause_row_ = -1;
  const bool any = snapshot && !snapshot->recurrent_states.empty();
  setVisible(any);
  table_->setRowCount(0);
  breach_->clear();
  breach_->setVisible(false);
  if (!any) return;
  const auto& states = snapshot->recurrent_states;
  table_->setRowCount(static_cast<int>(states.size()));
  for (size_t i = 0; i < states.size(); ++i) {
    fillRow(static_cast<int>(i), *snapshot, states[i]);
    if (states[i].root_cause && root_cause_row_ < 0) root_cause_row_ = static_cast<int>(i);
  }
  if (root_cause_row_ >= 0) {
    const RecurrentStateRow& cause = states[static_cast<size_t>(root_cause_row_)];
    breach_->setText(tr("<b style='color:%1'>Root cause, target call %2, layer %3 %4 state:</b> %5")
                         .arg(Palette::pruned().name())
                         .arg(cause.call)
                         .arg(cause.layer)
                         .arg(QString::fromStdString(cause.kind))
                         .arg(QString::fromStdString(cause.what).toHtmlEscaped()));
    breach_->setVisible(true);
    table_->selectRow(root_cause_row_);
    table_->scrollToItem(table_->item(root_cause_row_, Call), QAbstractItemView::PositionAtCenter);
  }
}

void RecurrentStatesView::fillRow(int row, const SessionSnapshot& s, const RecurrentStateRow& state) {
  QString every;
  const QString role = state.cache == CacheRole::Target ? tr("target") : tr("drafter");
  const QString cells[Columns] = {
      tr("%1 %2").arg(role).arg(state.call),
      span(state.first_position, state.first_position + std::max<int64_t>(state.inputs, 1) - 1),
      state.before ? tr("resumed from") : tr("left"),
      QString::number(state.layer),
      QString::fromStdString(state.kind),
      QString::number(state.id),
      state.after_position >= 0 ? QString::number(state.after_position) : tr("none (no call computed it)"),
      foldedText(s, state, &every),
      state.root_cause ? tr("ROOT CAUSE") : state.breach ? tr("breach") : tr("ok")};
  for (int c = 0; c < Columns; ++c) {
    auto* item = new QTableWidgetItem(cells[c]);
    if (c == Folded && !every.isEmpty()) item->setToolTip(every);
    if (state.breach) {
      item->setToolTip(QString::fromStdString(state.what));
      item->setBackground(state.root_cause ? Palette::rejected() : Palette::rejected().lighter(150));
      if (state.root_cause) {
        QFont bold = item->font();
        bold.setBold(true);
        item->setFont(bold);
      }
    }
    table_->setItem(row, c, item);
  }
}

}  // namespace kvscope::ui
