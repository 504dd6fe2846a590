#pragma once
// A cache row's history, like RenderDoc's pixel history: every logged cache
// operation that touched one ledger entry in one layer, in order: the append
// that wrote it (where, for which position, with which rotary position), the
// crops and resets that kept it (and at which row) or removed it (and why),
// other rows written for its position, what an injected fault did, and the
// eviction policy's Evict events that masked it in some of the layer's kv
// heads (the row stays where it is; those heads stop reading it).
// Torch-free: the GUI reads it from snapshots, the CLI from a session record.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct RowHistoryItem {
  int64_t event_index = 0;
  Moment moment;
  CacheEventKind operation = CacheEventKind::Append;
  int64_t row_after = -1;  // the entry's physical row in the layer after the event (-1: not held)
  std::string what;        // one line for people
  std::string fault_action;
  // A policy's Evict: the policy, and the kv heads of this layer it masked
  // the row in, with the policy's score of the row in each.
  std::string policy;
  std::vector<int64_t> kv_heads;
  std::vector<double> scores;
};

std::vector<RowHistoryItem> rowHistory(const std::vector<LedgerEntry>& entries, const CacheEventLog& events,
                                       int64_t entry, int64_t layer);

nlohmann::json toJson(const RowHistoryItem& item);

}  // namespace kvscope
