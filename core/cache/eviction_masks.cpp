#include "core/cache/eviction_masks.h"

namespace kvscope {

void EvictionMasks::apply(const CacheEvent& event, int64_t event_index) {
  if (!event.masksRows()) return;
  for (const MaskedRow& m : event.masked) by_row_.emplace(std::make_tuple(m.entry, m.layer, m.kv_head), event_index);
}

int64_t EvictionMasks::maskedBy(int64_t entry, int64_t layer, int64_t kv_head) const {
  const auto it = by_row_.find(std::make_tuple(entry, layer, kv_head));
  return it == by_row_.end() ? -1 : it->second;
}

int64_t EvictionMasks::maskedHeads(int64_t entry) const {
  // Keys are ordered by entry first: the entry's pairs are one contiguous range.
  const auto first = by_row_.lower_bound(std::make_tuple(entry, INT64_MIN, INT64_MIN));
  int64_t count = 0;
  for (auto it = first; it != by_row_.end() && std::get<0>(it->first) == entry; ++it) ++count;
  return count;
}

EvictionMasks masksAfterEvents(const CacheEventLog& log, CacheRole cache, size_t count) {
  EvictionMasks masks;
  const auto& events = log.events();
  for (size_t i = 0; i < count && i < events.size(); ++i) {
    if (events[i].cache == cache) masks.apply(events[i], static_cast<int64_t>(i));
  }
  return masks;
}

EvictionMasks masksAt(const CacheEventLog& log, CacheRole cache, const Moment& moment) {
  return masksAfterEvents(log, cache, log.countAtOrBefore(moment));
}

int64_t lastPolicyEviction(const CacheEventLog& log, CacheRole cache, const Moment& moment) {
  const size_t count = log.countAtOrBefore(moment);
  int64_t last = -1;
  for (size_t i = 0; i < count; ++i) {
    if (log.events()[i].cache == cache && log.events()[i].masksRows()) last = static_cast<int64_t>(i);
  }
  return last;
}

}  // namespace kvscope
