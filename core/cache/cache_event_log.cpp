#include "core/cache/cache_event_log.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace kvscope {

const char* cacheEventKindName(CacheEventKind kind) {
  switch (kind) {
    case CacheEventKind::Append: return "append";
    case CacheEventKind::Refeed: return "refeed";
    case CacheEventKind::Crop: return "crop";
    case CacheEventKind::Reset: return "reset";
    case CacheEventKind::Evict: return "evict";
    case CacheEventKind::DropPadding: return "drop padding";
    case CacheEventKind::Rewrite: return "rewrite";
  }
  return "?";
}

CacheEventKind parseCacheEventKind(const std::string& name) {
  // Rewrite is left out: a trace does not store the layouts it needs.
  for (CacheEventKind kind : {CacheEventKind::Append, CacheEventKind::Refeed, CacheEventKind::Crop,
                              CacheEventKind::Reset, CacheEventKind::Evict, CacheEventKind::DropPadding}) {
    if (name == cacheEventKindName(kind)) return kind;
  }
  throw Error("unknown cache operation '" + name + "'");
}

bool CacheEvent::touches(int64_t layer) const {
  return layers.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end();
}

namespace {

void checkPerLayerFields(const CacheEvent& e) {
  require(e.rows_before.size() == e.rows_after.size() && !e.rows_after.empty(),
          "cache event: rows before and after must be given for every layer");
  require(e.expected_first.empty() || e.expected_first.size() == e.rows_after.size(),
          "cache event: expected first positions must be given for every layer");
  for (int64_t layer : e.layers) {
    require(layer >= 0 && layer < static_cast<int64_t>(e.rows_after.size()),
            "cache event: touched layer " + std::to_string(layer) + " is out of range");
  }
  require(e.masked.empty() || e.masksRows(), "cache event: only a policy's evict event masks rows");
  require(e.layout.empty() || e.layout.size() == e.rows_after.size(),
          "cache event: an explicit layout must give every layer");
  for (const MaskedRow& m : e.masked) {
    require(m.layer >= 0 && m.layer < static_cast<int64_t>(e.rows_after.size()) && m.kv_head >= 0 && m.entry >= 0,
            "cache event: masked row (entry " + std::to_string(m.entry) + ", layer " + std::to_string(m.layer) +
                ", kv head " + std::to_string(m.kv_head) + ") is out of range");
  }
}

}  // namespace

void CacheEventLog::record(CacheEvent event) {
  checkPerLayerFields(event);
  events_.push_back(std::move(event));
}

void CacheEventLog::restore(std::vector<CacheEvent> events) {
  std::vector<int64_t> layers(2, -1);
  for (const CacheEvent& e : events) {
    checkPerLayerFields(e);
    int64_t& known = layers[e.cache == CacheRole::Target ? 0 : 1];
    const int64_t count = static_cast<int64_t>(e.rows_after.size());
    require(known < 0 || known == count, "cache events of one cache disagree in layer count");
    known = count;
  }
  events_ = std::move(events);
}

void applyEventToLayer(std::vector<int64_t>& rows, const CacheEvent& e, int64_t layer) {
  if (layer < 0 || layer >= static_cast<int64_t>(e.rows_after.size()) || !e.touches(layer)) return;
  if (static_cast<size_t>(layer) < e.layout.size()) {
    rows = e.layout[static_cast<size_t>(layer)];
    return;
  }
  if (e.masksRows()) return;  // masked rows stay where they are (core/cache/eviction_masks.h replays them)
  const size_t before = static_cast<size_t>(std::max<int64_t>(0, e.rows_before[static_cast<size_t>(layer)]));
  const size_t after = static_cast<size_t>(std::max<int64_t>(0, e.rows_after[static_cast<size_t>(layer)]));
  if (e.kind == CacheEventKind::Append || e.kind == CacheEventKind::Refeed) {
    rows.resize(std::min(rows.size(), before));
    for (size_t i = 0; i < e.written.size() && rows.size() < after; ++i) rows.push_back(e.written[i]);
  } else if (e.kind == CacheEventKind::Evict) {
    // Eviction removes rows anywhere; the survivors keep their order.
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](int64_t entry) {
                                return std::find(e.removed.begin(), e.removed.end(), entry) != e.removed.end();
                              }),
               rows.end());
  } else {
    rows.resize(std::min(rows.size(), after));
  }
}

void applyEvent(CacheLayout& layout, const CacheEvent& e) {
  for (size_t l = 0; l < layout.layers.size(); ++l) applyEventToLayer(layout.layers[l], e, static_cast<int64_t>(l));
}

CacheLayout CacheEventLog::layoutAfterEvents(CacheRole cache, int64_t layers, size_t count) const {
  CacheLayout layout;
  layout.layers.resize(static_cast<size_t>(std::max<int64_t>(layers, 0)));
  for (size_t i = 0; i < count && i < events_.size(); ++i) {
    if (events_[i].cache == cache) applyEvent(layout, events_[i]);
  }
  return layout;
}

size_t CacheEventLog::countAtOrBefore(const Moment& moment) const {
  size_t count = 0;
  while (count < events_.size() && atOrBefore(events_[count].moment(), moment)) ++count;
  return count;
}

CacheLayout CacheEventLog::layoutAt(CacheRole cache, int64_t layers, const Moment& moment) const {
  return layoutAfterEvents(cache, layers, countAtOrBefore(moment));
}

int64_t CacheEventLog::expectedRowsAt(CacheRole cache, const Moment& moment) const {
  int64_t expected = 0;
  const size_t count = countAtOrBefore(moment);
  for (size_t i = 0; i < count; ++i) {
    if (events_[i].cache == cache) expected = events_[i].expected_rows;
  }
  return expected;
}

RowContract CacheEventLog::contractAt(CacheRole cache, int64_t layer, const Moment& moment) const {
  RowContract contract;
  const size_t count = countAtOrBefore(moment);
  for (size_t i = 0; i < count; ++i) {
    const CacheEvent& e = events_[i];
    if (e.cache == cache && layer >= 0 && layer < static_cast<int64_t>(e.rows_after.size())) contract = e.contract(layer);
  }
  return contract;
}

int64_t CacheEventLog::layerCount(CacheRole cache) const {
  for (const CacheEvent& e : events_) {
    if (e.cache == cache) return static_cast<int64_t>(e.rows_after.size());
  }
  return 0;
}

std::string describeEvent(const CacheEvent& e, bool with_fault) {
  std::ostringstream out;
  out << "round " << e.round << " " << phaseName(e.phase);
  if (!e.call.empty()) out << ", " << e.call;
  out << " (" << cacheEventKindName(e.kind) << "): " << cacheRoleName(e.cache) << " ";
  const bool uniform_before = std::all_of(e.rows_before.begin(), e.rows_before.end(), [&](int64_t n) { return n == e.rows_before.front(); });
  const bool uniform_after = std::all_of(e.rows_after.begin(), e.rows_after.end(), [&](int64_t n) { return n == e.rows_after.front(); });
  auto rows = [](const std::vector<int64_t>& r, bool uniform) {
    if (uniform) return std::to_string(r.front());
    std::string s = "[";
    for (size_t i = 0; i < r.size(); ++i) s += (i ? " " : "") + std::to_string(r[i]);
    return s + "]";
  };
  out << rows(e.rows_before, uniform_before) << " -> " << rows(e.rows_after, uniform_after) << " rows, "
      << e.expected_rows << " required";
  if (!e.written.empty()) out << "; wrote " << e.written.size();
  if (!e.masked.empty()) out << "; policy " << e.policy << " masked " << e.masked.size() << " (layer, kv head) rows";
  if (!e.removed.empty()) out << "; removed " << e.removed.size() << " (" << deathReasonName(e.reason) << ")";
  if (with_fault && !e.fault_action.empty()) out << "; fault: " << e.fault_action;
  return out.str();
}

}  // namespace kvscope
