#include "core/snapshot/snapshot.h"

#include <algorithm>
#include <limits>

#include "core/audit/row_identity.h"
#include "core/cache/eviction_masks.h"

namespace kvscope {

std::shared_ptr<const PoolView> poolAt(const SessionSnapshot& snapshot, CacheRole cache, const Moment& moment) {
  if (const std::shared_ptr<const PoolHistory>& history = snapshot.poolHistory(cache)) {
    return std::make_shared<const PoolView>(poolViewAt(*history, moment));
  }
  return snapshot.pool(cache);
}

bool previousMoment(const Moment& m, Moment* out) {
  switch (m.phase) {
    case Phase::Prefill: return false;
    case Phase::Draft: *out = m.round <= 1 ? Moment{0, Phase::Prefill} : Moment{m.round - 1, Phase::Prune}; return true;
    case Phase::Verify: *out = {m.round, Phase::Draft}; return true;
    case Phase::Accept: *out = {m.round, Phase::Verify}; return true;
    case Phase::Prune: *out = {m.round, Phase::Accept}; return true;
  }
  return false;
}

Moment nextMoment(const Moment& m) {
  switch (m.phase) {
    case Phase::Prefill: return {1, Phase::Draft};
    case Phase::Draft: return {m.round, Phase::Verify};
    case Phase::Verify: return {m.round, Phase::Accept};
    case Phase::Accept: return {m.round, Phase::Prune};
    case Phase::Prune: return {m.round + 1, Phase::Draft};
  }
  return m;
}

int64_t SessionSnapshot::lastRound() const {
  Moment previous;
  return previousMoment({current_round, next_phase}, &previous) ? previous.round : -1;
}

Phase SessionSnapshot::lastPhase() const {
  Moment previous;
  previousMoment({current_round, next_phase}, &previous);
  return previous.phase;
}

std::string SessionSnapshot::tokenText(int64_t id) const {
  if (vocab && id >= 0 && id < static_cast<int64_t>(vocab->size())) return (*vocab)[static_cast<size_t>(id)];
  return "<id " + std::to_string(id) + ">";
}

const RoundRecord* SessionSnapshot::round(int64_t index) const {
  if (index >= 0 && index < static_cast<int64_t>(rounds.size()) && rounds[static_cast<size_t>(index)].index == index) {
    return &rounds[static_cast<size_t>(index)];
  }
  for (const RoundRecord& record : rounds) {
    if (record.index == index) return &record;
  }
  return nullptr;
}

int64_t AttentionData::keyCount(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(keys.size()) ? keys[static_cast<size_t>(layer)] : 0;
}

float AttentionData::at(int64_t layer, int64_t head, int64_t query, int64_t key) const {
  const int64_t k = keyCount(layer);
  if (layer < 0 || layer >= layerCount() || head < 0 || head >= heads || query < 0 || query >= queries || key < 0 ||
      key >= k) {
    return 0.0f;
  }
  const auto& data = layers[static_cast<size_t>(layer)];
  const size_t at = static_cast<size_t>((head * queries + query) * k + key);
  return at < data.size() ? data[at] : 0.0f;
}

bool AttentionData::visible(int64_t layer, int64_t query, int64_t key) const {
  const int64_t k = keyCount(layer);
  if (layer < 0 || layer >= static_cast<int64_t>(masks.size()) || query < 0 || query >= queries || key < 0 || key >= k) {
    return false;
  }
  const auto& mask = masks[static_cast<size_t>(layer)];
  const size_t at = static_cast<size_t>(query * k + key);
  return at < mask.size() && mask[at] != 0;
}

const char* rowStatusName(RowStatus status) {
  switch (status) {
    case RowStatus::Hidden: return "hidden";
    case RowStatus::Kept: return "kept";
    case RowStatus::Written: return "written this round";
    case RowStatus::Pruned: return "removed this round";
    case RowStatus::WrittenPruned: return "written and removed this round";
  }
  return "?";
}

namespace {

std::vector<int64_t> replayLayer(const SessionSnapshot& s, CacheRole cache, int64_t layer, size_t from_count,
                                 std::vector<int64_t> rows, size_t to_count, std::vector<int64_t>* removed) {
  const auto& events = s.events.events();
  for (size_t i = from_count; i < to_count && i < events.size(); ++i) {
    const CacheEvent& e = events[i];
    if (e.cache != cache) continue;
    if (!removed) {
      applyEventToLayer(rows, e, layer);
      continue;
    }
    const std::vector<int64_t> before = rows;
    applyEventToLayer(rows, e, layer);
    for (int64_t entry : before) {
      if (std::find(rows.begin(), rows.end(), entry) == rows.end() &&
          std::find(removed->begin(), removed->end(), entry) == removed->end()) {
        removed->push_back(entry);
      }
    }
  }
  return rows;
}

bool validEntry(const SessionSnapshot& s, int64_t entry) {
  return entry >= 0 && entry < static_cast<int64_t>(s.entries.size());
}

}  // namespace

std::vector<int64_t> physicalRows(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment) {
  return replayLayer(s, cache, layer, 0, {}, s.events.countAtOrBefore(moment), nullptr);
}

RowContract rowContract(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment) {
  return s.events.contractAt(cache, layer, moment);
}

std::vector<ViewRow> viewRows(const SessionSnapshot& s, CacheRole cache, int64_t layer, const Moment& moment) {
  const auto& events = s.events.events();
  const size_t count = s.events.countAtOrBefore(moment);
  size_t round_start = 0;  // the first event of the moment's round
  while (round_start < count && events[round_start].round < moment.round) ++round_start;
  const std::vector<int64_t> at_start = replayLayer(s, cache, layer, 0, {}, round_start, nullptr);
  std::vector<int64_t> removed;
  const std::vector<int64_t> now = replayLayer(s, cache, layer, round_start, at_start, count, &removed);

  const std::vector<int64_t> stream = streamOfRound(s.sequence, s.prompt_length, s.rounds, moment.round);
  std::vector<RowVerdict> verdicts = classifyRows(s.entries, cache, layer, now, rowContract(s, cache, layer, moment), stream);
  std::vector<ViewRow> rows;
  for (size_t r = 0; r < now.size(); ++r) {
    if (!validEntry(s, now[r])) continue;
    const LedgerEntry& e = s.entries[static_cast<size_t>(now[r])];
    ViewRow row{now[r], static_cast<int64_t>(r), e.born_round == moment.round ? RowStatus::Written : RowStatus::Kept,
                r < verdicts.size() ? verdicts[r].state : RowState::Ok};
    rows.push_back(row);
  }
  for (int64_t entry : removed) {
    if (!validEntry(s, entry) || std::find(now.begin(), now.end(), entry) != now.end()) continue;
    const LedgerEntry& e = s.entries[static_cast<size_t>(entry)];
    rows.push_back({entry, -1, e.born_round == moment.round ? RowStatus::WrittenPruned : RowStatus::Pruned,
                    RowState::Ok});
  }
  return rows;
}

std::vector<int64_t> verifyKeyRows(const SessionSnapshot& s, int64_t round, int64_t layer) {
  return physicalRows(s, CacheRole::Target, layer, {round, Phase::Verify});
}

std::vector<float> attentionReceived(const SessionSnapshot& s, int64_t round, int64_t layer, int64_t entry) {
  const auto it = s.attention.find(round);
  if (it == s.attention.end() || !it->second) return {};
  const AttentionData& a = *it->second;
  const std::vector<int64_t> keys = verifyKeyRows(s, round, layer);
  std::vector<float> received;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] != entry || static_cast<int64_t>(k) >= a.keyCount(layer)) continue;
    received.assign(static_cast<size_t>(a.heads), 0.0f);
    for (int64_t h = 0; h < a.heads; ++h) {
      for (int64_t q = 0; q < a.queries; ++q) received[static_cast<size_t>(h)] += a.at(layer, h, q, static_cast<int64_t>(k));
    }
  }
  return received;
}

CacheMatrix cacheMatrix(const SessionSnapshot& s, CacheRole cache, const Moment& moment, int64_t layer,
                        int64_t kv_head, bool values) {
  CacheMatrix matrix;
  const CacheGeometry& geometry = s.geometry(cache);
  if (!geometry.present || layer < 0 || layer >= geometry.layers || kv_head < 0 || kv_head >= geometry.kv_heads) {
    return matrix;
  }
  matrix.cols = geometry.head_dim;
  matrix.rows = viewRows(s, cache, layer, moment);
  const EvictionMasks masks = masksAt(s.events, cache, moment);
  if (!masks.empty()) {
    for (ViewRow& row : matrix.rows) {
      if (row.physical_row >= 0) row.masked_by = masks.maskedBy(row.entry, layer, kv_head);
    }
  }
  matrix.values.reserve(matrix.rows.size() * static_cast<size_t>(matrix.cols));
  float lo = std::numeric_limits<float>::max();
  float hi = std::numeric_limits<float>::lowest();
  const size_t offset = static_cast<size_t>((layer * geometry.kv_heads + kv_head) * geometry.head_dim);
  for (const ViewRow& row : matrix.rows) {
    const LedgerEntry& entry = s.entries[static_cast<size_t>(row.entry)];
    const auto data_row = entry.row >= 0 && entry.row < static_cast<int64_t>(s.rows.size())
                              ? s.rows[static_cast<size_t>(entry.row)]
                              : nullptr;
    const std::vector<float>* data = data_row ? (values ? &data_row->v : &data_row->k) : nullptr;
    for (int64_t c = 0; c < matrix.cols; ++c) {
      const size_t at = offset + static_cast<size_t>(c);
      const float x = data && at < data->size() ? (*data)[at] : 0.0f;
      matrix.values.push_back(x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (!matrix.values.empty()) {
    matrix.min = lo;
    matrix.max = hi;
  }
  return matrix;
}

}  // namespace kvscope
