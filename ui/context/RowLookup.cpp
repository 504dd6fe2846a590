#include "ui/context/RowLookup.h"

#include <algorithm>

#include "core/audit/row_identity.h"

namespace kvscope::ui {

int64_t rowOfEntry(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment, int64_t entry) {
  if (entry < 0) return -1;
  const std::vector<int64_t> rows = physicalRows(s, cache, layer, moment);
  const auto found = std::find(rows.begin(), rows.end(), entry);
  return found == rows.end() ? -1 : static_cast<int64_t>(found - rows.begin());
}

int64_t entryAtRow(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment, int64_t row) {
  const std::vector<int64_t> rows = physicalRows(s, cache, layer, moment);
  return row >= 0 && row < static_cast<int64_t>(rows.size()) ? rows[static_cast<size_t>(row)] : -1;
}

int64_t expectedToken(const SessionSnapshot& s, int64_t round, int64_t position) {
  const std::vector<int64_t> stream = streamOfRound(s.sequence, s.prompt_length, s.rounds, round);
  return position >= 0 && position < static_cast<int64_t>(stream.size()) ? stream[static_cast<size_t>(position)] : -1;
}

int64_t entryAtPosition(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment,
                        int64_t position) {
  if (position < 0) return -1;
  const int64_t token = expectedToken(s, moment.round, position);
  int64_t last = -1;
  for (int64_t entry : physicalRows(s, cache, layer, moment)) {
    const LedgerEntry& e = s.entries[static_cast<size_t>(entry)];
    if (e.position != position) continue;
    if (e.token == token) return entry;
    last = entry;
  }
  return last;
}

std::vector<RowVerdict> rowVerdicts(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment) {
  const std::vector<int64_t> rows = physicalRows(s, cache, layer, moment);
  const std::vector<int64_t> stream = streamOfRound(s.sequence, s.prompt_length, s.rounds, moment.round);
  return classifyRows(s.entries, cache, layer, rows, rowContract(s, cache, layer, moment), stream);
}

int verdictSeverity(RowState state) {
  switch (state) {
    case RowState::Ok: return 0;
    case RowState::Padding: return 0;  // a pad row is no fault by itself
    case RowState::WrongValues: return 1;
    case RowState::WrongPosition: return 2;
    case RowState::Duplicate: return 3;
    case RowState::Missing: return 4;
    case RowState::Stale: return 5;
  }
  return 0;
}

}  // namespace kvscope::ui
