#include "core/audit/root_cause.h"

#include <torch/types.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/audit/row_identity.h"
#include "core/cache/eviction_masks.h"
#include "core/error.h"
#include "core/trace/trace_json.h"

namespace kvscope {
namespace {

std::string quoted(const TokenText& text, int64_t token) {
  std::string shown = text ? text(token) : std::string();
  return shown.empty() ? "<id " + std::to_string(token) + ">" : "'" + shown + "'";
}

std::string describeRow(const SessionRecord& record, const RowVerdict& v, const TokenText& text) {
  std::ostringstream out;
  if (v.state == RowState::Missing) {
    out << "row " << v.row << " should hold " << quoted(text, v.token) << " (position " << v.position
        << ") and nothing holds it";
    return out.str();
  }
  const LedgerEntry& e = record.ledger.entry(v.entry);
  const RoundRecord* born = e.born_round > 0 && e.born_round < static_cast<int64_t>(record.rounds.size())
                                ? &record.rounds[static_cast<size_t>(e.born_round)]
                                : nullptr;
  const bool rejected_draft = born && born->next_token >= 0 && e.position >= born->start_length + born->accepted;
  out << "row " << v.row << " holds " << (rejected_draft ? "rejected draft " : "") << quoted(text, v.token)
      << " written for position " << v.position;
  if (v.rope_position != v.position) out << " with rotary position " << v.rope_position;
  out << " in round " << e.born_round << "'s " << phaseName(e.born_phase);
  switch (v.state) {
    case RowState::Stale: out << ", which should have been removed"; break;
    case RowState::Duplicate: out << ", a second copy of position " << v.position; break;
    case RowState::WrongPosition:
      out << (v.rope_position != v.position && v.position == v.row ? ", rotated for the wrong position"
                                                                  : ", in the wrong slot");
      break;
    case RowState::WrongValues:
      out << ", with wrong values (max |dK| " << v.max_abs_dk.value_or(0) << ", |dV| " << v.max_abs_dv.value_or(0)
          << ")";
      break;
    default: break;
  }
  return out.str();
}

std::string sentence(const SessionRecord& record, const RootCause& c, const TokenText& text) {
  std::ostringstream out;
  out << "round " << c.round << "'s " << cacheRoleName(c.cache) << " " << phaseName(c.phase) << " ("
      << cacheEventKindName(c.operation) << ")";
  if (c.actual_rows != c.expected_rows) {
    out << " left " << c.actual_rows << " rows where " << c.expected_rows << " were required";
  } else {
    out << " broke the cache contract";
  }
  if (c.layers.size() < static_cast<size_t>(record.layers(c.cache))) {
    out << " in layer" << (c.layers.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < c.layers.size(); ++i) out << (i ? ", " : "") << c.layers[i];
  }
  if (!c.verdicts.empty()) out << "; " << describeRow(record, c.verdicts.front(), text);
  if (c.verdicts.size() > 1) out << " (" << c.verdicts.size() << " rows wrong)";
  if (!c.fault_action.empty()) out << " [fault: " << c.fault_action << "]";
  return out.str();
}

RootCause causeAt(const CacheEvent& e, size_t index) {
  RootCause c;
  c.event_index = static_cast<int64_t>(index);
  c.cache = e.cache;
  c.round = e.round;
  c.phase = e.phase;
  c.operation = e.kind;
  c.expected_rows = e.expected_rows;
  c.fault_action = e.fault_action;
  return c;
}

// Structural departure after event e: wrong row counts or identities.
std::optional<RootCause> structuralDeparture(const SessionRecord& record, const CacheEvent& e, size_t index,
                                             const CacheLayout& layout) {
  const std::vector<int64_t> stream = record.streamOfRound(e.round);
  std::optional<RootCause> cause;
  for (int64_t layer = 0; layer < static_cast<int64_t>(layout.layers.size()); ++layer) {
    const auto& rows = layout.layers[static_cast<size_t>(layer)];
    std::vector<RowVerdict> broken = brokenRows(record.ledger.entries(), e.cache, layer, rows, e.contract(layer), stream);
    if (broken.empty() && static_cast<int64_t>(rows.size()) == e.contract(layer).rows()) continue;
    if (!cause) {
      cause = causeAt(e, index);
      cause->expected_rows = e.contract(layer).rows();
      cause->actual_rows = static_cast<int64_t>(rows.size());
      cause->verdicts = broken;
      for (const RowVerdict& v : broken) {
        if (std::find(cause->rows.begin(), cause->rows.end(), v.row) == cause->rows.end()) cause->rows.push_back(v.row);
      }
    }
    cause->layers.push_back(layer);
  }
  if (!cause && e.max_store_error > 0) {  // stored K/V are not what the forward computed
    cause = causeAt(e, index);
    cause->actual_rows = e.rows_after.front();
    for (int64_t l = 0; l < static_cast<int64_t>(e.rows_after.size()); ++l) cause->layers.push_back(l);
    for (size_t i = 0; i < e.written.size(); ++i) cause->rows.push_back(e.rows_before.front() + static_cast<int64_t>(i));
    std::ostringstream action;
    action << "stored K/V differ from the computed values by up to " << e.max_store_error;
    cause->fault_action = cause->fault_action.empty() ? action.str() : cause->fault_action + "; " + action.str();
  }
  return cause;
}

// Value departure: rows an append wrote that differ from a recomputation.
std::optional<RootCause> valueDeparture(const SessionRecord& record, const CacheEvent& e, size_t index,
                                        const CausalLM& model, const AuditTolerance& tol) {
  if (e.written.empty()) return std::nullopt;
  const CacheAudit audit = auditAt(record, e.cache, e.moment(), &model, tol);
  std::optional<RootCause> cause;
  for (const RowVerdict& v : audit.rows) {
    // Identity problems at this moment were checked event by event already;
    // later operations at the same moment (a prefill's eviction after its
    // append) are theirs to answer for.
    if (v.state != RowState::WrongValues) continue;
    if (std::find(e.written.begin(), e.written.end(), v.entry) == e.written.end()) continue;
    if (!cause) {
      cause = causeAt(e, index);
      cause->actual_rows = e.rows_after.front();
    }
    if (std::find(cause->layers.begin(), cause->layers.end(), v.layer) == cause->layers.end()) {
      cause->layers.push_back(v.layer);
    }
    if (v.layer == cause->layers.front()) {
      cause->rows.push_back(v.row);
      cause->verdicts.push_back(v);
    }
  }
  if (cause) std::sort(cause->layers.begin(), cause->layers.end());
  return cause;
}

}  // namespace

std::optional<RootCause> findRootCause(const SessionRecord& record, const RootCauseOptions& options,
                                       const TokenText& text) {
  const auto& events = record.events.events();
  CacheLayout layouts[2];
  layouts[0].layers.resize(static_cast<size_t>(record.target_layers));
  layouts[1].layers.resize(static_cast<size_t>(record.drafter_layers));
  for (size_t i = 0; i < events.size(); ++i) {
    const CacheEvent& e = events[i];
    CacheLayout& layout = layouts[e.cache == CacheRole::Target ? 0 : 1];
    applyEvent(layout, e);
    std::optional<RootCause> cause = structuralDeparture(record, e, i, layout);
    const CausalLM* model = e.cache == CacheRole::Target ? options.target : options.drafter;
    const bool check_values = !cause && model && options.check_values_until &&
                              atOrBefore(e.moment(), *options.check_values_until) &&
                              (e.kind == CacheEventKind::Append || e.kind == CacheEventKind::Refeed);
    if (check_values) cause = valueDeparture(record, e, i, *model, options.tolerance);
    if (cause) {
      cause->what = sentence(record, *cause, text);
      return cause;
    }
  }
  return std::nullopt;
}

std::optional<EvictionCause> evictionBefore(const SessionRecord& record, CacheRole cache, const Moment& moment) {
  const int64_t last = lastPolicyEviction(record.events, cache, moment);
  if (last < 0) return std::nullopt;
  const auto& events = record.events.events();
  const CacheEvent& e = events[static_cast<size_t>(last)];
  EvictionCause c;
  c.event_index = last;
  c.cache = cache;
  c.round = e.round;
  c.phase = e.phase;
  c.policy = e.policy;
  for (int64_t i = 0; i <= last; ++i) {
    const CacheEvent& earlier = events[static_cast<size_t>(i)];
    if (earlier.cache != cache || !earlier.masksRows()) continue;
    ++c.evictions;
    c.masked += static_cast<int64_t>(earlier.masked.size());
  }
  std::ostringstream out;
  out << "evicted by policy " << c.policy << " at round " << c.round << " (" << phaseName(c.phase) << "): "
      << e.masked.size() << " rows masked in the " << cacheRoleName(cache) << " cache";
  if (c.evictions > 1) out << " (" << c.masked << " in " << c.evictions << " evictions so far)";
  out << "; every cache operation kept the contract, so the drift is the policy's, not a cache bug";
  c.what = out.str();
  return c;
}

}  // namespace kvscope
