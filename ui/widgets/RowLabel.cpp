#include "ui/widgets/RowLabel.h"

#include "ui/widgets/DisplayToken.h"

namespace kvscope::ui {

QString rowLabel(const SessionSnapshot& snapshot, int64_t physical_row, int64_t entry_index, int max_token_chars) {
  if (entry_index < 0 || entry_index >= static_cast<int64_t>(snapshot.entries.size())) {
    return QStringLiteral("r%1 ?").arg(physical_row);
  }
  const LedgerEntry& entry = snapshot.entries[static_cast<size_t>(entry_index)];
  QString token = displayToken(snapshot.tokenText(entry.token));
  if (token.size() > max_token_chars) token = token.left(max_token_chars - 1) + QStringLiteral("\u2026");
  // No physical row: the entry was removed (pruned, evicted) and is drawn where it was.
  if (physical_row < 0) return QStringLiteral("removed p%1 '%2'").arg(entry.position).arg(token);
  if (physical_row == entry.position) return QStringLiteral("%1 '%2'").arg(entry.position).arg(token);
  return QStringLiteral("r%1:p%2 '%3'").arg(physical_row).arg(entry.position).arg(token);
}

QString rowLabel(const SessionSnapshot& snapshot, const ViewRow& row, int max_token_chars) {
  return rowLabel(snapshot, row.physical_row, row.entry, max_token_chars);
}

}  // namespace kvscope::ui
