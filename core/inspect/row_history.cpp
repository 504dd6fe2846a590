#include "core/inspect/row_history.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvscope {
namespace {

int64_t rowOf(const std::vector<int64_t>& rows, int64_t entry) {
  const auto it = std::find(rows.begin(), rows.end(), entry);
  return it == rows.end() ? -1 : static_cast<int64_t>(it - rows.begin());
}

std::string identity(const LedgerEntry& e) {
  std::string s = "token " + std::to_string(e.token) + " for position " + std::to_string(e.position);
  if (e.rope_position != e.position) s += " with rotary position " + std::to_string(e.rope_position);
  return s;
}

// The kv heads of `layer` a policy's Evict masked `entry` in, with the scores.
void maskedHeads(const CacheEvent& e, int64_t entry, int64_t layer, RowHistoryItem& item) {
  for (const MaskedRow& m : e.masked) {
    if (m.entry != entry || m.layer != layer) continue;
    item.kv_heads.push_back(m.kv_head);
    item.scores.push_back(m.score);
  }
}

std::string describeMasking(const CacheEvent& e, const RowHistoryItem& item, bool died) {
  std::ostringstream out;
  out << "masked by policy " << e.policy << " in kv head" << (item.kv_heads.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < item.kv_heads.size(); ++i) {
    out << (i ? ", " : "") << item.kv_heads[i] << " (score " << std::setprecision(4) << item.scores[i] << ")";
  }
  out << "; stays at row " << item.row_after << (died ? "; no head reads it any more (evicted)" : "");
  return out.str();
}

}  // namespace

std::vector<RowHistoryItem> rowHistory(const std::vector<LedgerEntry>& entries, const CacheEventLog& log,
                                       int64_t entry, int64_t layer) {
  std::vector<RowHistoryItem> history;
  if (entry < 0 || entry >= static_cast<int64_t>(entries.size())) return history;
  const LedgerEntry& target = entries[static_cast<size_t>(entry)];
  const auto& events = log.events();
  std::vector<int64_t> rows;  // the layer's physical rows, replayed
  for (size_t i = 0; i < events.size(); ++i) {
    const CacheEvent& e = events[i];
    if (e.cache != target.cache || !e.touches(layer)) continue;
    const int64_t before = rowOf(rows, entry);
    applyEventToLayer(rows, e, layer);
    const int64_t after = rowOf(rows, entry);
    const bool writes = std::find(e.written.begin(), e.written.end(), entry) != e.written.end();
    bool same_position = false;
    for (int64_t w : e.written) {
      same_position = same_position || (w != entry && w >= 0 && w < static_cast<int64_t>(entries.size()) &&
                                        entries[static_cast<size_t>(w)].position == target.position);
    }
    RowHistoryItem item{static_cast<int64_t>(i), e.moment(), e.kind, after, "", e.fault_action, "", {}, {}};
    const std::string required = std::to_string(e.contract(layer).rows()) + " required";
    if (e.masksRows()) {
      maskedHeads(e, entry, layer, item);
      if (item.kv_heads.empty()) continue;  // the policy kept this row here
      item.policy = e.policy;
      const bool died = std::find(e.removed.begin(), e.removed.end(), entry) != e.removed.end();
      item.what = describeMasking(e, item, died);
    } else if (writes) {
      item.what = after >= 0 ? "written at row " + std::to_string(after) + ": " + identity(target)
                             : "computed but not written to this layer: " + identity(target);
    } else if (before >= 0 && after < 0) {
      item.what = "removed from row " + std::to_string(before) + " (" + deathReasonName(e.reason) + "); cache cut to " +
                  std::to_string(rows.size()) + " rows, " + required;
    } else if (before >= 0 && (e.kind == CacheEventKind::Crop || e.kind == CacheEventKind::Reset ||
                               e.kind == CacheEventKind::Evict)) {
      item.what = "kept at row " + std::to_string(after) + "; cache cut to " + std::to_string(rows.size()) + " rows, " +
                  required;
    } else if (before >= 0 && same_position) {
      item.what = "another row written for position " + std::to_string(target.position) + "; this one stays at row " +
                  std::to_string(after);
    } else if (before >= 0 && before != after) {
      item.what = "moved from row " + std::to_string(before) + " to row " + std::to_string(after);
    } else {
      continue;  // the event did not touch this row
    }
    history.push_back(std::move(item));
  }
  return history;
}

nlohmann::json toJson(const RowHistoryItem& item) {
  return {{"event", item.event_index},      {"round", item.moment.round},
          {"phase", phaseName(item.moment.phase)}, {"operation", cacheEventKindName(item.operation)},
          {"row_after", item.row_after},    {"what", item.what},
          {"fault_action", item.fault_action}, {"policy", item.policy},
          {"kv_heads", item.kv_heads},      {"scores", item.scores}};
}

}  // namespace kvscope
