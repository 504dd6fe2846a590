#include "core/audit/row_history.h"

#include <algorithm>
#include <iomanip>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/audit/row_identity.h"

namespace kvscope {

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

bool contains(const std::vector<int64_t>& list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

int64_t rowOf(const std::vector<int64_t>& rows, int64_t entry) {
  const auto it = std::find(rows.begin(), rows.end(), entry);
  return it == rows.end() ? -1 : static_cast<int64_t>(it - rows.begin());
}

std::string identity(const LedgerEntry& e) {
  if (e.padding) return "pad token " + std::to_string(e.token) + " (padding, no position)";
  std::string s = "token " + std::to_string(e.token) + " for position " + std::to_string(e.position);
  if (e.rope_position != e.position) s += " with rotary position " + std::to_string(e.rope_position);
  return s;
}

bool cuts(const CacheEvent& e) {
  return e.kind == CacheEventKind::Crop || e.kind == CacheEventKind::Reset || e.kind == CacheEventKind::Evict ||
         e.kind == CacheEventKind::DropPadding;
}

// An append that wrote another row for the entry's position. Pad rows have
// no position (-1 in the books), so they rival nothing and nothing rivals them.
bool rivals(const std::vector<LedgerEntry>& entries, const CacheEvent& e, int64_t entry) {
  const LedgerEntry& held = entries[static_cast<size_t>(entry)];
  if (held.padding) return false;
  return std::any_of(e.written.begin(), e.written.end(), [&](int64_t w) {
    return w != entry && w >= 0 && w < static_cast<int64_t>(entries.size()) &&
           !entries[static_cast<size_t>(w)].padding && entries[static_cast<size_t>(w)].position == held.position;
  });
}

std::optional<RowEffect> effectOf(const std::vector<LedgerEntry>& entries, const CacheEvent& e, int64_t entry,
                                  int64_t before, int64_t after) {
  if (contains(e.written, entry) && before < 0) return RowEffect::Born;
  if (before >= 0 && after < 0) return RowEffect::Removed;
  if (before < 0) return std::nullopt;
  if (after != before) return RowEffect::Moved;
  if (cuts(e) || contains(e.removed, entry)) return RowEffect::Kept;
  if (rivals(entries, e, entry)) return RowEffect::Rivalled;
  return std::nullopt;
}

// The kv heads of `layer` a policy's Evict masked `entry` in, with the scores.
void maskedHeads(const CacheEvent& e, int64_t entry, int64_t layer, RowHistoryItem& item) {
  for (const MaskedRow& m : e.masked) {
    if (m.entry != entry || m.layer != layer) continue;
    item.kv_heads.push_back(m.kv_head);
    item.scores.push_back(m.score);
  }
}

// "in kv heads 0 (score 0.0123), 1 (score 0.004)"
std::string maskedHeadsText(const RowHistoryItem& item) {
  std::ostringstream out;
  out << "in kv head" << (item.kv_heads.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < item.kv_heads.size(); ++i) {
    out << (i ? ", " : "") << item.kv_heads[i] << " (score " << std::setprecision(4) << item.scores[i] << ")";
  }
  return out.str();
}

std::string whatHappened(const LedgerEntry& target, const CacheEvent& e, const RowHistoryItem& item, int64_t before,
                         int64_t rows_after) {
  const std::string cut = "cache cut to " + std::to_string(rows_after) + " rows, " +
                          std::to_string(item.expected_rows) + " required";
  switch (item.effect) {
    case RowEffect::Born:
      return item.row_after >= 0 ? "written at row " + std::to_string(item.row_after) + ": " + identity(target)
                                 : "computed but not written to this layer: " + identity(target);
    case RowEffect::Removed:
      return "removed from row " + std::to_string(before) + " (" + deathReasonName(e.reason) + "); " + cut;
    case RowEffect::Moved:
      return "moved from row " + std::to_string(before) + " to row " + std::to_string(item.row_after) +
             (cuts(e) ? "; " + cut : "");
    case RowEffect::Kept: return "kept at row " + std::to_string(item.row_after) + "; " + cut;
    case RowEffect::Rivalled:
      return "another row written for position " + std::to_string(target.position) + "; this one stays at row " +
             std::to_string(item.row_after);
    case RowEffect::Masked:
      return "masked by policy " + item.policy + " " + maskedHeadsText(item) + "; stays at row " +
             std::to_string(item.row_after) + (contains(e.removed, item.entry) ? "; no head reads it any more (evicted)" : "");
  }
  return "";
}

// The entry's verdict in a layer's rows after an event.
RowState stateAfter(const std::vector<LedgerEntry>& entries, const CacheEvent& e, int64_t layer,
                    const std::vector<int64_t>& rows, int64_t row, const RoundStream& stream) {
  if (row < 0 || !stream) return RowState::Ok;
  const std::vector<RowVerdict> verdicts = classifyRows(entries, e.cache, layer, rows, e.contract(layer), stream(e.round));
  return row < static_cast<int64_t>(verdicts.size()) ? verdicts[static_cast<size_t>(row)].state : RowState::Ok;
}

// The root cause in a few words: the engine's call for a capture, else
// kvscope's round and phase ("round 1's target prune (crop)").
std::string rootCauseName(const CacheEventLog& log, const RootCause& c) {
  const auto& events = log.events();
  if (c.event_index >= 0 && c.event_index < static_cast<int64_t>(events.size())) {
    const std::string& call = events[static_cast<size_t>(c.event_index)].call;
    if (!call.empty()) return call + " (" + cacheEventKindName(c.operation) + ")";
  }
  return "round " + std::to_string(c.round) + "'s " + cacheRoleName(c.cache) + " " + phaseName(c.phase) + " (" +
         cacheEventKindName(c.operation) + ")";
}

// Says how the item stands to the root cause, in its own words too.
void relateToRootCause(RowHistoryItem& item, const CacheEventLog& log, const RootCause& cause) {
  if (item.event_index < cause.event_index) return;
  if (item.event_index == cause.event_index) {
    item.root_cause_relation = "root cause";
    item.root_cause_note = "this operation is the root cause";
  } else {
    item.root_cause_relation = "after the root cause";
    if (item.state != RowState::Ok) {
      item.root_cause_note = "follows from the root cause, " + rootCauseName(log, cause) + ", not a cause of its own";
    } else if (item.effect == RowEffect::Born) {
      item.root_cause_note = "written after the root cause, " + rootCauseName(log, cause) + ": its sequence may follow from it";
    }
  }
  if (!item.root_cause_note.empty()) item.what += "; " + item.root_cause_note;
}

}  // namespace

std::vector<RowHistoryItem> rowHistory(const std::vector<LedgerEntry>& entries, const CacheEventLog& log,
                                       int64_t entry, int64_t layer, const RoundStream& stream,
                                       const RootCause* root_cause) {
  std::vector<RowHistoryItem> history;
  if (entry < 0 || entry >= static_cast<int64_t>(entries.size())) return history;
  const LedgerEntry& target = entries[static_cast<size_t>(entry)];
  const auto& events = log.events();
  std::vector<int64_t> rows;  // the layer's physical rows, replayed event by event
  for (size_t i = 0; i < events.size(); ++i) {
    const CacheEvent& e = events[i];
    if (e.cache != target.cache || !e.touches(layer)) continue;
    const int64_t before = rowOf(rows, entry);
    applyEventToLayer(rows, e, layer);
    const int64_t after = rowOf(rows, entry);
    const std::optional<RowEffect> effect = effectOf(entries, e, entry, before, after);
    if (!effect) continue;
    RowHistoryItem item;
    item.entry = entry;
    item.event_index = static_cast<int64_t>(i);
    item.moment = e.moment();
    item.operation = e.kind;
    item.effect = *effect;
    item.row_after = after;
    item.state = stateAfter(entries, e, layer, rows, after, stream);
    item.expected_rows = e.contract(layer).rows();
    item.event_text = describeEvent(e, /*with_fault=*/false);
    item.fault_action = e.fault_action;
    if (e.masksRows()) {
      maskedHeads(e, entry, layer, item);
      if (item.kv_heads.empty()) continue;  // the policy masked other rows; this one it kept
      item.effect = RowEffect::Masked;
      item.policy = e.policy;
      const bool evicted = contains(e.removed, entry);
      item.event_text += "; policy " + e.policy + " masked it " + maskedHeadsText(item) +
                         (evicted ? "; no head reads it any more: evicted" : "");
    }
    item.what = whatHappened(target, e, item, before, static_cast<int64_t>(rows.size()));
    if (root_cause) relateToRootCause(item, log, *root_cause);
    history.push_back(std::move(item));
    if (*effect == RowEffect::Removed) break;  // later operations no longer touch it in this layer
  }
  return history;
}

nlohmann::json toJson(const RowHistoryItem& item) {
  return {{"event", item.event_index},
          {"round", item.moment.round},
          {"phase", phaseName(item.moment.phase)},
          {"operation", cacheEventKindName(item.operation)},
          {"effect", rowEffectName(item.effect)},
          {"row_after", item.row_after},
          {"state", rowStateName(item.state)},
          {"expected_rows", item.expected_rows},
          {"what", item.what},
          {"event_text", item.event_text},
          {"fault_action", item.fault_action},
          {"policy", item.policy},
          {"kv_heads", item.kv_heads},
          {"scores", item.scores},
          {"root_cause", item.root_cause_relation}};
}

}  // namespace kvscope
