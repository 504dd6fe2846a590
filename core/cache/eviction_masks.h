#pragma once
// Which rows eviction policies have masked, replayed from the cache event
// log: for each (ledger entry, layer, kv head), the policy Evict event that
// masked it. The physical layout (CacheEventLog::layoutAt) says which entry
// a row holds; this says whether a kv head still reads it. Together they
// answer "is row r of layer l, head h masked at moment m".
//
// Ledger entries are never reused (a re-fed token is a new entry), so a mask
// never needs undoing: once a crop or reset removes the entry, no row holds
// it. Torch-free, like the log.
#include <cstdint>
#include <map>
#include <tuple>

#include "core/cache/cache_event_log.h"

namespace kvscope {

class EvictionMasks {
 public:
  // Adds the rows a policy's Evict event masked (other events change nothing).
  void apply(const CacheEvent& event, int64_t event_index);
  // The index of the event that masked `entry` in (layer, kv_head); -1: read.
  int64_t maskedBy(int64_t entry, int64_t layer, int64_t kv_head) const;
  bool masked(int64_t entry, int64_t layer, int64_t kv_head) const { return maskedBy(entry, layer, kv_head) >= 0; }
  // The (layer, kv head) pairs that no longer read `entry`.
  int64_t maskedHeads(int64_t entry) const;
  bool empty() const { return by_row_.empty(); }
  int64_t size() const { return static_cast<int64_t>(by_row_.size()); }

 private:
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> by_row_;  // (entry, layer, kv head) -> event
};

// The masks of `cache` after events [0, count) of the log.
EvictionMasks masksAfterEvents(const CacheEventLog& log, CacheRole cache, size_t count);
// The masks of `cache` just after `moment`.
EvictionMasks masksAt(const CacheEventLog& log, CacheRole cache, const Moment& moment);
// The index of the last policy Evict event of `cache` at or before `moment`; -1: none.
int64_t lastPolicyEviction(const CacheEventLog& log, CacheRole cache, const Moment& moment);

}  // namespace kvscope
