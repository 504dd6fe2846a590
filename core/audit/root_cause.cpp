#include "core/audit/root_cause.h"

#include <torch/types.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/audit/contract_walk.h"
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

// "pool block 5 (rows 12-15, now on the free list)".
std::string blockList(const std::vector<DanglingBlock>& blocks) {
  std::ostringstream out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const DanglingBlock& d = blocks[i];
    out << (i ? ", " : "") << d.block << " (rows " << d.first_row << "-" << d.first_row + d.rows - 1 << ", ";
    if (d.owner < 0) {
      out << "on the free list)";
    } else {
      out << "now sequence " << d.owner << "'s)";
    }
  }
  return out.str();
}

// A paged table mapping blocks its sequence no longer owns.
std::string blockSentence(const RootCause& c) {
  std::ostringstream out;
  out << "round " << c.round << "'s " << cacheRoleName(c.cache) << " " << phaseName(c.phase) << " ("
      << cacheEventKindName(c.operation) << ") left sequence " << c.sequence << "'s block table mapping pool block"
      << (c.dangling_blocks.size() > 1 ? "s " : " ") << blockList(c.dangling_blocks)
      << " that the sequence no longer owns: the pool hands a freed block to the next sequence that needs one, and "
         "the rows either writes there become the other's";
  if (!c.fault_action.empty()) out << " [fault: " << c.fault_action << "]";
  return out.str();
}

// Rows another sequence wrote over in this sequence's own blocks.
std::string overwriteSentence(const RootCause& c) {
  std::ostringstream out;
  out << "round " << c.round << "'s " << cacheRoleName(c.cache) << " " << phaseName(c.phase) << " ("
      << cacheEventKindName(c.operation) << ") found row" << (c.rows.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < c.rows.size(); ++i) out << (i ? ", " : "") << c.rows[i];
  out << " of sequence " << c.sequence << "'s cache overwritten";
  if (c.overwritten_by >= 0) out << " by sequence " << c.overwritten_by;
  out << ", whose write landed in a pool block this sequence owns";
  if (!c.fault_action.empty()) out << " [fault: " << c.fault_action << "]";
  return out.str();
}

// A forward that attended pad rows of a left-padded sequence.
std::string paddingSentence(const RootCause& c) {
  std::ostringstream out;
  out << "round " << c.round << "'s " << cacheRoleName(c.cache) << " " << phaseName(c.phase) << " ("
      << cacheEventKindName(c.operation) << ") attended pad row" << (c.rows.size() > 1 ? "s " : " ");
  if (c.rows.size() > 1 && c.rows.back() - c.rows.front() + 1 == static_cast<int64_t>(c.rows.size())) {
    out << c.rows.front() << "-" << c.rows.back();
  } else {
    for (size_t i = 0; i < c.rows.size(); ++i) out << (i ? ", " : "") << c.rows[i];
  }
  out << " of sequence " << c.sequence << "'s cache: a left-padded sequence's pad rows hold no token of its "
      << "text and every forward's mask must hide them, but this forward's did not";
  if (!c.fault_action.empty()) out << " [fault: " << c.fault_action << "]";
  return out.str();
}

std::string sentence(const SessionRecord& record, const RootCause& c, const TokenText& text) {
  if (c.kind == "padding") return paddingSentence(c);
  if (c.kind == "block") return blockSentence(c);
  if (c.kind == "overwritten") return overwriteSentence(c);
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
      cause = causeAtEvent(e, index);
      cause->kind = "values";
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

// A breach's word for a session's operation: the change between forwards
// by its own name, a forward's rows by what they should have been.
std::string sessionKind(const RootCause& c, const CacheEvent& e) {
  if (!c.kind.empty()) return c.kind;
  if (!c.forward()) return cacheEventKindName(c.operation);
  const bool window = std::any_of(c.layers.begin(), c.layers.end(), [&](int64_t l) { return e.expectedFirst(l) > 0; });
  return window ? "window" : "rows";
}

// kvscope's own books: the stream of each event's round, the values of its
// appends against an uncached recomputation with the session's models.
class SessionRules : public ContractRules {
 public:
  SessionRules(const SessionRecord& record, const RootCauseOptions& options, const TokenText& text)
      : record_(record), options_(options), text_(text) {}

  std::vector<int64_t> streamOf(size_t index) const override {
    return record_.streamOfRound(record_.events.events()[index].round);
  }

  std::optional<RootCause> valueBreach(size_t index) override {
    const CacheEvent& e = record_.events.events()[index];
    const CausalLM* model = e.cache == CacheRole::Target ? options_.target : options_.drafter;
    if (!model || !options_.check_values_until || !atOrBefore(e.moment(), *options_.check_values_until)) return std::nullopt;
    std::optional<RootCause> cause = valueDeparture(record_, e, index, *model, options_.tolerance);
    if (cause) cause->sequence = options_.sequence;
    if (cause) cause->what = sentence(record_, *cause, text_);
    return cause;
  }

  void describe(RootCause& cause) const override {
    cause.sequence = options_.sequence;
    cause.kind = sessionKind(cause, record_.events.events()[static_cast<size_t>(cause.event_index)]);
    cause.what = sentence(record_, cause, text_);
  }

 private:
  const SessionRecord& record_;
  const RootCauseOptions& options_;
  const TokenText& text_;
};

}  // namespace

std::optional<RootCause> findRootCause(const SessionRecord& record, const RootCauseOptions& options,
                                       const TokenText& text) {
  SessionRules rules(record, options, text);
  return walkContract(record, rules);
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
