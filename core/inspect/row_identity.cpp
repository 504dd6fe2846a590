#include "core/inspect/row_identity.h"

#include <algorithm>

namespace kvscope {
namespace {

bool holdsStreamToken(const LedgerEntry& e, int64_t expected_rows, const std::vector<int64_t>& stream) {
  return e.position >= 0 && e.position < expected_rows && e.position < static_cast<int64_t>(stream.size()) &&
         e.token == stream[static_cast<size_t>(e.position)];
}

}  // namespace

std::vector<RowVerdict> classifyRows(const std::vector<LedgerEntry>& entries, CacheRole cache, int64_t layer,
                                     const std::vector<int64_t>& rows, int64_t expected_rows,
                                     const std::vector<int64_t>& stream) {
  const int64_t expected = std::clamp<int64_t>(expected_rows, 0, static_cast<int64_t>(stream.size()));
  std::vector<bool> in_place(static_cast<size_t>(expected), false);  // slot p holds position p
  std::vector<bool> present(static_cast<size_t>(expected), false);   // position p held in some slot
  for (size_t r = 0; r < rows.size(); ++r) {
    const LedgerEntry& e = entries.at(static_cast<size_t>(rows[r]));
    if (!holdsStreamToken(e, expected, stream)) continue;
    present[static_cast<size_t>(e.position)] = true;
    if (e.position == static_cast<int64_t>(r)) in_place[r] = true;
  }
  std::vector<RowVerdict> verdicts;
  for (size_t r = 0; r < rows.size(); ++r) {
    const LedgerEntry& e = entries.at(static_cast<size_t>(rows[r]));
    RowVerdict v;
    v.cache = cache;
    v.layer = layer;
    v.row = static_cast<int64_t>(r);
    v.entry = rows[r];
    v.token = e.token;
    v.position = e.position;
    v.rope_position = e.rope_position;
    if (!holdsStreamToken(e, expected, stream)) {
      v.state = RowState::Stale;  // a row the bookkeeping says should not be there
    } else if (e.position == static_cast<int64_t>(r)) {
      v.state = e.rope_position == e.position ? RowState::Ok : RowState::WrongPosition;
    } else {
      v.state = in_place[static_cast<size_t>(e.position)] ? RowState::Duplicate : RowState::WrongPosition;
    }
    verdicts.push_back(v);
  }
  for (int64_t p = 0; p < expected; ++p) {
    if (present[static_cast<size_t>(p)]) continue;
    RowVerdict v;
    v.cache = cache;
    v.layer = layer;
    v.row = p;
    v.token = stream[static_cast<size_t>(p)];
    v.position = v.rope_position = p;
    v.state = RowState::Missing;
    verdicts.push_back(v);
  }
  return verdicts;
}

}  // namespace kvscope
