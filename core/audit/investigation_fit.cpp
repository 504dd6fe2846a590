#include "core/audit/investigation_fit.h"

#include <algorithm>

namespace kvscope {

namespace {

// What a trace recorded, as bounds on what its investigation may name.
struct Recorded {
  int64_t last_round = 0;
  int64_t positions = 0;  // positions [0, positions): the sequence and every round's drafts
  int64_t entries = 0;    // ledger entries: no layer ever holds more rows
  int64_t events = 0;
  int64_t layers[2] = {0, 0};

  explicit Recorded(const SessionRecord& r) {
    last_round = r.rounds.empty() ? 0 : r.rounds.back().index;
    positions = static_cast<int64_t>(r.sequence.size());
    for (const RoundRecord& round : r.rounds) {
      positions = std::max(positions, round.start_length + static_cast<int64_t>(round.drafts.size()) + 1);
    }
    entries = r.ledger.size();
    events = static_cast<int64_t>(r.events.events().size());
    layers[0] = r.target_layers;
    layers[1] = r.drafter_layers;
  }
  int64_t layersOf(CacheRole cache) const { return layers[cache == CacheRole::Target ? 0 : 1]; }
  bool round(int64_t r) const { return r >= 0 && r <= last_round; }
  bool position(int64_t p) const { return p >= 0 && p < positions; }
  bool row(int64_t r) const { return r >= 0 && r < std::max<int64_t>(entries, 1); }
  bool layer(CacheRole cache, int64_t l) const { return l >= 0 && l < layersOf(cache); }
};

// "" when the verdict fits, else what does not.
std::string unfitVerdict(const RowVerdict& v, const Recorded& at) {
  if (!at.layer(v.cache, v.layer)) return "layer " + std::to_string(v.layer);
  if (!at.row(v.row)) return "row " + std::to_string(v.row);
  if (v.entry < -1 || v.entry >= at.entries) return "entry " + std::to_string(v.entry);
  return "";
}

std::string unfitAudit(const CacheAudit& a, const Recorded& at) {
  const int64_t layers = at.layersOf(a.cache);
  if (!at.round(a.moment.round)) return "round " + std::to_string(a.moment.round);
  if (static_cast<int64_t>(a.rows_per_layer.size()) > layers) return std::to_string(a.rows_per_layer.size()) + " layers";
  if (static_cast<int64_t>(a.error.size()) > layers) return std::to_string(a.error.size()) + " layers of errors";
  for (int64_t rows : a.rows_per_layer) {
    if (rows < 0 || rows > at.entries) return std::to_string(rows) + " rows in a layer";
  }
  for (const auto& errors : a.error) {
    if (static_cast<int64_t>(errors.size()) > at.entries) return std::to_string(errors.size()) + " errors in a layer";
  }
  for (const RowVerdict& v : a.rows) {
    if (std::string why = unfitVerdict(v, at); !why.empty()) return "a row's " + why;
  }
  return "";
}

std::string unfitRootCause(const RootCause& c, const Recorded& at) {
  if (c.event_index < 0 || c.event_index >= at.events) return "event " + std::to_string(c.event_index);
  if (!at.round(c.round)) return "round " + std::to_string(c.round);
  for (int64_t l : c.layers) {
    if (!at.layer(c.cache, l)) return "layer " + std::to_string(l);
  }
  for (int64_t r : c.rows) {
    if (!at.row(r)) return "row " + std::to_string(r);
  }
  for (const RowVerdict& v : c.verdicts) {
    if (std::string why = unfitVerdict(v, at); !why.empty()) return "a row's " + why;
  }
  return "";
}

std::string unfitDivergence(const FirstDivergence& d, const Recorded& at) {
  if (!at.round(d.round)) return "round " + std::to_string(d.round);
  if (!at.position(d.position)) return "position " + std::to_string(d.position);
  if (d.layer && !at.layer(d.cache, *d.layer)) return "layer " + std::to_string(*d.layer);
  if (d.row && !at.row(*d.row)) return "row " + std::to_string(*d.row);
  if (d.head && (*d.head < 0 || *d.head >= 4096)) return "head " + std::to_string(*d.head);
  return "";
}

template <typename T, typename Check>
void dropUnfit(std::optional<T>& part, const char* field, const Recorded& at, Check check, std::vector<std::string>& out) {
  if (!part) return;
  const std::string why = check(*part, at);
  if (why.empty()) return;
  out.push_back(std::string("the trace's investigation.diff.") + field + " names " + why +
                ", which the trace did not record: dropped");
  part.reset();
}

}  // namespace

std::vector<std::string> fitInvestigation(DiffReport& report, const SessionRecord& record) {
  const Recorded at(record);
  std::vector<std::string> warnings;
  dropUnfit(report.first_divergence, "first_divergence", at, unfitDivergence, warnings);
  dropUnfit(report.audit_at_divergence, "audit_at_divergence", at, unfitAudit, warnings);
  dropUnfit(report.root_cause, "root_cause", at, unfitRootCause, warnings);
  const auto unfit = [&](const PositionDiff& p) { return !at.round(p.round) || !at.position(p.position); };
  const auto dropped = std::count_if(report.positions.begin(), report.positions.end(), unfit);
  if (dropped > 0) {
    report.positions.erase(std::remove_if(report.positions.begin(), report.positions.end(), unfit), report.positions.end());
    warnings.push_back("the trace's investigation.diff.positions: " + std::to_string(dropped) +
                       " name a round or position the trace did not record: dropped");
  }
  if (report.eviction_cause && (report.eviction_cause->event_index < 0 || report.eviction_cause->event_index >= at.events)) {
    warnings.push_back("the trace's investigation.diff.eviction_cause names event " +
                       std::to_string(report.eviction_cause->event_index) + ", which the trace did not record: dropped");
    report.eviction_cause.reset();
  }
  return warnings;
}

}  // namespace kvscope
