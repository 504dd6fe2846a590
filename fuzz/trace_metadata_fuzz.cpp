// Fuzzes the JSON half of a .kvtrace (the "kvscope" metadata): the limits,
// the record readers (rounds, ledger entries, cache events) and the event
// log replay the views do. The tensor half is safetensors_fuzz's; the
// cross-checks between both are covered by tests/core/hostile_trace_test.
#include <string_view>

#include "core/cache/cache_event_log.h"
#include "core/cache/eviction_masks.h"
#include "core/error.h"
#include "core/model/json_limits.h"
#include "core/trace/trace_json.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const json doc = kvscope::parseJsonWithLimits(text, "trace", kvscope::kTraceMetadataLimits);
    if (!doc.is_object()) return 0;
    std::vector<kvscope::CacheEvent> events;
    if (doc.contains("events") && doc["events"].is_array())
      for (const json& e : doc["events"]) events.push_back(kvscope::cacheEventFromJson(e));
    if (doc.contains("rounds") && doc["rounds"].is_array())
      for (const json& r : doc["rounds"]) (void)kvscope::toJson(kvscope::roundFromJson(r));
    if (doc.contains("ledger") && doc["ledger"].is_array())
      for (const json& l : doc["ledger"]) (void)kvscope::toJson(kvscope::ledgerEntryFromJson(l));
    kvscope::CacheEventLog log;
    log.restore(events);
    for (kvscope::CacheRole role : {kvscope::CacheRole::Target, kvscope::CacheRole::Drafter}) {
      const int64_t layers = log.layerCount(role);
      if (layers > 64) continue;  // the validator bounds layers; here, keep executions fast
      (void)log.layoutAfterEvents(role, layers, events.size());
      // The policy masks the heatmap and row history replay.
      const kvscope::EvictionMasks masks = kvscope::masksAfterEvents(log, role, events.size());
      for (const kvscope::CacheEvent& e : events)
        for (const kvscope::MaskedRow& m : e.masked) (void)masks.maskedHeads(m.entry);
    }
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
