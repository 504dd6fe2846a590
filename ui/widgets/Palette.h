#pragma once
// The colours every panel uses for token origins, cache row statuses and
// row verdicts (a row that breaks the bookkeeping has the same colour everywhere).
#include <QColor>
#include <QList>

#include <QString>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

struct Palette {
  static QColor prompt() { return QColor(215, 215, 215); }
  static QColor acceptedDraft() { return QColor(120, 200, 120); }
  static QColor correction() { return QColor(90, 150, 230); }
  static QColor bonus() { return QColor(240, 190, 60); }
  static QColor rejected() { return QColor(230, 90, 80); }
  static QColor pending() { return QColor(200, 180, 240); }
  static QColor written() { return QColor(40, 170, 60); }
  static QColor pruned() { return QColor(220, 40, 40); }
  static QColor selection() { return QColor(255, 170, 0); }
  // Rows an eviction policy masked in the shown kv head (they stay, unread).
  static QColor evicted() { return QColor(110, 110, 110); }

  // Row verdicts (RowState); Ok rows get no mark.
  static QColor rowState(RowState state) {
    switch (state) {
      case RowState::Ok: return QColor(0, 0, 0, 0);
      case RowState::Stale: return QColor(200, 0, 120);
      case RowState::Missing: return QColor(120, 0, 160);
      case RowState::Duplicate: return QColor(255, 120, 0);
      case RowState::WrongPosition: return QColor(0, 110, 220);
      case RowState::WrongValues: return QColor(220, 40, 40);
      case RowState::Padding: return QColor(160, 160, 160, 90);  // a pad row: masked, no position
    }
    return QColor(0, 0, 0, 0);
  }
  // A verdict as a reader says it: "wrong position" (the core's name is an identifier, wrong_position).
  static QString rowStateLabel(RowState state) {
    return QString::fromUtf8(rowStateName(state)).replace(QLatin1Char('_'), QLatin1Char(' '));
  }
  // An HTML legend of the verdict colours; each swatch stays with its name
  // when a narrow label wraps the legend.
  static QString rowStateLegend() {
    return rowStateLegend({RowState::Stale, RowState::Missing, RowState::Duplicate, RowState::WrongPosition,
                           RowState::WrongValues});
  }
  // Only these verdicts (a view that keys what it draws).
  static QString rowStateLegend(std::initializer_list<RowState> states) { return rowStateLegend(QList<RowState>(states)); }
  static QString rowStateLegend(const QList<RowState>& states) {
    QString html;
    for (RowState state : states) {
      html += QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2 ")
                  .arg(rowState(state).name(), rowStateLabel(state).replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
    }
    return html;
  }

  // A batch's sequences (the paged pool's owners): eight hues that stay apart
  // from each other, from free grey and from the dangling red; more wrap.
  static QColor sequence(int64_t sequence) {
    static const QColor hues[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),  QColor(148, 103, 189),
                                  QColor(140, 86, 75),  QColor(227, 119, 194), QColor(23, 190, 207), QColor(188, 189, 34)};
    return hues[static_cast<size_t>(sequence < 0 ? 0 : sequence % 8)];
  }
  static QColor freeBlock() { return QColor(215, 215, 215); }
  // A block table entry freed while still mapped (the free-mapped fault).
  static QColor dangling() { return QColor(210, 0, 0); }

  static QColor origin(TokenOrigin origin) {
    switch (origin) {
      case TokenOrigin::Prompt: return prompt();
      case TokenOrigin::AcceptedDraft: return acceptedDraft();
      case TokenOrigin::Correction: return correction();
      case TokenOrigin::Bonus: return bonus();
    }
    return prompt();
  }
};

}  // namespace kvscope::ui
