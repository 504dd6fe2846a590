#include "ui/widgets/RoundDraftsTable.h"


#include "ui/widgets/DisplayToken.h"

namespace kvscope::ui {

namespace {

enum Column { kDraft, kToken, kQ, kP, kTargetChoice, kVerdict, kColumns };

double valueAt(const std::vector<double>& values, size_t index) { return index < values.size() ? values[index] : -1.0; }

QString probability(double value) { return value >= 0 ? QString::number(value, 'f', 3) : QStringLiteral("-"); }

// The target's most likely token at draft i's position, from the verify's recorded top tokens.
QString targetChoice(const SessionSnapshot& snapshot, const RoundRecord& round, size_t i) {
  const auto found = snapshot.attention.find(round.index);
  if (found == snapshot.attention.end() || i >= found->second->top_tokens.size() || found->second->top_tokens[i].empty()) {
    return QStringLiteral("-");
  }
  const auto& [id, p] = found->second->top_tokens[i].front();
  return QStringLiteral("'%1' (%2)").arg(displayToken(snapshot.tokenText(id))).arg(static_cast<double>(p), 0, 'f', 3);
}

QString verdict(const SessionSnapshot& snapshot, const RoundRecord& round, size_t i, bool judged) {
  if (!judged) return QObject::tr("not judged yet");
  const auto index = static_cast<int64_t>(i);
  if (index > round.accepted) return QObject::tr("discarded: after the first rejection");
  const bool accepted = index < round.accepted;
  if (snapshot.greedy) {
    return accepted ? QObject::tr("accepted: the target's argmax") : QObject::tr("rejected: the target's argmax differs");
  }
  const double q = valueAt(round.q_draft, i), p = valueAt(round.p_draft, i), u = valueAt(round.uniforms, i);
  if (u < 0 || q <= 0) return accepted ? QObject::tr("accepted") : QObject::tr("rejected");
  return QStringLiteral("u %1 %2 min(1, p/q) %3: %4")
      .arg(u, 0, 'f', 3)
      .arg(accepted ? QStringLiteral("<") : QStringLiteral(">="))
      .arg(std::min(1.0, p / q), 0, 'f', 3)
      .arg(accepted ? QObject::tr("accepted") : QObject::tr("rejected"));
}

}  // namespace

RoundDraftsTable::RoundDraftsTable(QWidget* parent) : QLabel(parent) {
  setObjectName(QStringLiteral("roundDraftsTable"));
  setTextFormat(Qt::RichText);
  setAlignment(Qt::AlignLeft | Qt::AlignTop);
  setWordWrap(true);  // a narrow stage wraps the cells rather than widening the panel
}

QString RoundDraftsTable::cellText(int row, int column) const {
  if (row < 0 || row >= rows_.size() || column < 0 || column >= rows_[row].size()) return {};
  return rows_[row][column];
}

void RoundDraftsTable::showRound(const SessionSnapshot& snapshot, const RoundRecord& round, Phase phase) {
  const bool verified = phaseOrder(phase) >= phaseOrder(Phase::Verify);
  const bool judged = phaseOrder(phase) >= phaseOrder(Phase::Accept) && round.next_token >= 0;
  rows_.clear();
  for (size_t i = 0; i < round.drafts.size(); ++i) {
    rows_.push_back({
        QString::number(i + 1),
        QStringLiteral("'%1'").arg(displayToken(snapshot.tokenText(round.drafts[i]))),
        probability(valueAt(round.q_draft, i)),
        verified ? probability(valueAt(round.p_draft, i)) : tr("verify pending"),
        verified ? targetChoice(snapshot, round, i) : QStringLiteral("-"),
        verdict(snapshot, round, i, judged),
    });
  }
  // Token text is the model's (any bytes): escaped, never markup.
  QString html = QStringLiteral("<table cellspacing='0' cellpadding='3' border='1' style='border-collapse:collapse'><tr>");
  for (const QString& title : {tr("draft"), tr("token"), tr("q(d) drafter"), tr("p(d) target"), tr("target's top token"), tr("verdict")}) {
    html += QStringLiteral("<th>%1</th>").arg(title.toHtmlEscaped());
  }
  html += QStringLiteral("</tr>");
  for (const QStringList& row : rows_) {
    html += QStringLiteral("<tr>");
    for (int column = 0; column < row.size(); ++column) {
      const bool number = column == kDraft || column == kQ || column == kP;
      html += QStringLiteral("<td align='%1'>%2</td>").arg(number ? QStringLiteral("right") : QStringLiteral("left"), row[column].toHtmlEscaped());
    }
    html += QStringLiteral("</tr>");
  }
  setText(html + QStringLiteral("</table>"));
}

}  // namespace kvscope::ui
