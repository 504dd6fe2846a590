#include "core/audit/row_identity.h"

#include <algorithm>

namespace kvscope {
namespace {

// The contract clipped to the stream it refers to.
struct Expected {
  int64_t first = 0;
  int64_t end = 0;
  bool covers(int64_t position) const { return position >= first && position < end; }
  size_t slot(int64_t position) const { return static_cast<size_t>(position - first); }
  size_t size() const { return static_cast<size_t>(std::max<int64_t>(0, end - first)); }
};

bool holdsStreamToken(const LedgerEntry& e, const Expected& expected, const std::vector<int64_t>& stream) {
  return expected.covers(e.position) && e.token == stream[static_cast<size_t>(e.position)];
}

// Pad rows at the front of a left-padded sequence's layer: its positions start after them.
size_t leadingPadding(const std::vector<LedgerEntry>& entries, const std::vector<int64_t>& rows) {
  size_t lead = 0;
  while (lead < rows.size() && entries.at(static_cast<size_t>(rows[lead])).padding) ++lead;
  return lead;
}

RowVerdict verdictFor(CacheRole cache, int64_t layer, int64_t row) {
  RowVerdict v;
  v.cache = cache;
  v.layer = layer;
  v.row = row;
  return v;
}

}  // namespace

std::vector<RowVerdict> classifyRows(const std::vector<LedgerEntry>& entries, CacheRole cache, int64_t layer,
                                     const std::vector<int64_t>& rows, const RowContract& contract,
                                     const std::vector<int64_t>& stream) {
  Expected expected;
  expected.end = std::clamp<int64_t>(contract.end, 0, static_cast<int64_t>(stream.size()));
  expected.first = std::clamp<int64_t>(contract.first, 0, expected.end);
  // Position p belongs in row lead + p - first: a left-padded layer's pad rows come first.
  const size_t lead = leadingPadding(entries, rows);
  std::vector<bool> in_place(expected.size(), false);  // the slot of position p holds p
  std::vector<bool> present(expected.size(), false);   // position p held in some row
  for (size_t r = lead; r < rows.size(); ++r) {
    const LedgerEntry& e = entries.at(static_cast<size_t>(rows[r]));
    if (!holdsStreamToken(e, expected, stream)) continue;
    present[expected.slot(e.position)] = true;
    if (expected.slot(e.position) == r - lead) in_place[r - lead] = true;
  }
  std::vector<RowVerdict> verdicts;
  for (size_t r = 0; r < rows.size(); ++r) {
    const LedgerEntry& e = entries.at(static_cast<size_t>(rows[r]));
    RowVerdict v = verdictFor(cache, layer, static_cast<int64_t>(r));
    v.entry = rows[r];
    v.token = e.token;
    v.position = e.position;
    v.rope_position = e.rope_position;
    if (e.padding) {
      v.state = RowState::Padding;  // holds no position; whether attention hid it is the walker's check
    } else if (!holdsStreamToken(e, expected, stream)) {
      v.state = RowState::Stale;  // a row the bookkeeping says should not be there (or has left the window)
    } else if (r >= lead && expected.slot(e.position) == r - lead) {
      v.state = e.rope_position == e.position ? RowState::Ok : RowState::WrongPosition;
    } else {
      v.state = in_place[expected.slot(e.position)] ? RowState::Duplicate : RowState::WrongPosition;
    }
    verdicts.push_back(v);
  }
  for (int64_t p = expected.first; p < expected.end; ++p) {
    if (present[expected.slot(p)]) continue;
    RowVerdict v = verdictFor(cache, layer, static_cast<int64_t>(lead) + p - expected.first);
    v.token = stream[static_cast<size_t>(p)];
    v.position = v.rope_position = p;
    v.state = RowState::Missing;
    verdicts.push_back(v);
  }
  return verdicts;
}

std::vector<RowVerdict> brokenRows(const std::vector<LedgerEntry>& entries, CacheRole cache, int64_t layer,
                                   const std::vector<int64_t>& rows, const RowContract& contract,
                                   const std::vector<int64_t>& stream) {
  std::vector<RowVerdict> broken;
  for (const RowVerdict& v : classifyRows(entries, cache, layer, rows, contract, stream)) {
    if (v.state != RowState::Ok && v.state != RowState::Padding) broken.push_back(v);
  }
  std::stable_sort(broken.begin(), broken.end(), [](const RowVerdict& a, const RowVerdict& b) {
    const bool a_missing = a.state == RowState::Missing, b_missing = b.state == RowState::Missing;
    return a.row != b.row ? a.row < b.row : a_missing && !b_missing;
  });
  return broken;
}

}  // namespace kvscope
