#include "ui/context/RowHistory.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "core/inspect/row_identity.h"

namespace kvscope::ui {

const char* rowEffectName(RowEffect effect) {
  switch (effect) {
    case RowEffect::Born: return "written";
    case RowEffect::Kept: return "kept";
    case RowEffect::Moved: return "moved";
    case RowEffect::Removed: return "removed";
    case RowEffect::Rivalled: return "another row written for its position";
    case RowEffect::Masked: return "masked by an eviction policy";
  }
  return "?";
}

namespace {

std::string rowCounts(const std::vector<int64_t>& rows) {
  const bool uniform = std::all_of(rows.begin(), rows.end(), [&](int64_t n) { return n == rows.front(); });
  if (uniform) return std::to_string(rows.front());
  std::string text = "[";
  for (size_t i = 0; i < rows.size(); ++i) text += (i ? " " : "") + std::to_string(rows[i]);
  return text + "] (per layer)";
}

bool contains(const std::vector<int64_t>& list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The entry's verdict in a layer's rows after an event (the bookkeeping of that event's round).
RowState stateAfter(const SessionSnapshot& s, const CacheEvent& e, int64_t layer, const std::vector<int64_t>& rows,
                    int64_t row) {
  if (row < 0) return RowState::Ok;
  const std::vector<int64_t> stream = streamOfRound(s.sequence, s.prompt_length, s.rounds, e.round);
  const std::vector<RowVerdict> verdicts = classifyRows(s.entries, e.cache, layer, rows, e.contract(layer), stream);
  return row < static_cast<int64_t>(verdicts.size()) ? verdicts[static_cast<size_t>(row)].state : RowState::Ok;
}

bool rivals(const SessionSnapshot& s, const CacheEvent& e, int64_t entry) {
  const int64_t position = s.entries[static_cast<size_t>(entry)].position;
  return std::any_of(e.written.begin(), e.written.end(), [&](int64_t w) {
    return w != entry && w >= 0 && w < static_cast<int64_t>(s.entries.size()) &&
           s.entries[static_cast<size_t>(w)].position == position;
  });
}

// The kv heads of `layer` a policy's Evict masked `entry` in, with the scores.
void maskedHeads(const CacheEvent& e, int64_t entry, int64_t layer, RowEvent& out) {
  for (const MaskedRow& m : e.masked) {
    if (m.entry != entry || m.layer != layer) continue;
    out.kv_heads.push_back(m.kv_head);
    out.scores.push_back(m.score);
  }
}

// "policy h2o masked it in kv heads 0 (score 0.0123), 1 (score 0.004)"
std::string maskedText(const RowEvent& e, bool evicted) {
  std::ostringstream out;
  out << "policy " << e.policy << " masked it in kv head" << (e.kv_heads.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < e.kv_heads.size(); ++i) {
    out << (i ? ", " : "") << e.kv_heads[i] << " (score " << std::setprecision(4) << e.scores[i] << ")";
  }
  if (evicted) out << "; no head reads it any more: evicted";
  return out.str();
}

std::optional<RowEffect> effectOf(const SessionSnapshot& s, const CacheEvent& e, int64_t entry, int64_t row_before,
                                  int64_t row_after) {
  if (contains(e.written, entry) && row_before < 0) return RowEffect::Born;
  if (row_before >= 0 && row_after < 0) return RowEffect::Removed;
  if (row_before < 0) return std::nullopt;
  if (row_after != row_before) return RowEffect::Moved;
  const bool cuts = e.kind == CacheEventKind::Crop || e.kind == CacheEventKind::Reset || e.kind == CacheEventKind::Evict;
  if (cuts || contains(e.removed, entry)) return RowEffect::Kept;
  if (rivals(s, e, entry)) return RowEffect::Rivalled;
  return std::nullopt;
}

std::vector<RowAttention> attentionOf(const SessionSnapshot& s, const LedgerEntry& e, int64_t entry, int64_t layer) {
  std::vector<RowAttention> received;
  if (e.cache != CacheRole::Target) return received;
  for (const auto& [round, data] : s.attention) {
    if (round < e.born_round) continue;
    std::vector<float> per_head = attentionReceived(s, round, layer, entry);
    if (!per_head.empty()) received.push_back({round, std::move(per_head)});
  }
  return received;
}

}  // namespace

std::string describeCacheEvent(const CacheEvent& e) {
  std::ostringstream out;
  out << "round " << e.round << " " << phaseName(e.phase) << " (" << cacheEventKindName(e.kind) << "): "
      << cacheRoleName(e.cache) << " " << rowCounts(e.rows_before) << " -> " << rowCounts(e.rows_after) << " rows, "
      << e.expected_rows << " required";
  if (!e.written.empty()) out << "; wrote " << e.written.size();
  if (!e.masked.empty()) out << "; policy " << e.policy << " masked " << e.masked.size() << " (layer, kv head) rows";
  if (!e.removed.empty()) out << "; removed " << e.removed.size() << " (" << deathReasonName(e.reason) << ")";
  return out.str();
}

RowHistory rowHistory(const SessionSnapshot& s, int64_t entry, int64_t layer) {
  RowHistory history;
  if (entry < 0 || entry >= static_cast<int64_t>(s.entries.size())) return history;
  const LedgerEntry& target = s.entries[static_cast<size_t>(entry)];
  history.entry = entry;
  history.cache = target.cache;
  history.layer = layer;
  const auto& events = s.events.events();
  std::vector<int64_t> rows;  // the layer's physical rows, replayed event by event
  for (size_t i = 0; i < events.size(); ++i) {
    const CacheEvent& e = events[i];
    if (e.cache != target.cache || !e.touches(layer)) continue;
    const auto at = [&] {
      const auto found = std::find(rows.begin(), rows.end(), entry);
      return found == rows.end() ? int64_t{-1} : static_cast<int64_t>(found - rows.begin());
    };
    const int64_t before = at();
    applyEventToLayer(rows, e, layer);
    const int64_t after = at();
    const std::optional<RowEffect> effect = effectOf(s, e, entry, before, after);
    if (!effect) continue;
    RowEvent item{static_cast<int64_t>(i), e.round, e.phase, e.kind, *effect, after,
                  stateAfter(s, e, layer, rows, after), e.contract(layer).rows(), describeCacheEvent(e),
                  e.fault_action, "", {}, {}};
    if (e.masksRows()) {
      maskedHeads(e, entry, layer, item);
      if (!item.kv_heads.empty()) {
        item.effect = RowEffect::Masked;
        item.policy = e.policy;
        item.operation += "; " + maskedText(item, contains(e.removed, entry));
      }
    }
    history.events.push_back(std::move(item));
    if (*effect == RowEffect::Removed) break;  // later operations no longer touch it in this layer
  }
  history.attention = attentionOf(s, target, entry, layer);
  return history;
}

}  // namespace kvscope::ui
