#pragma once
// The one root-cause walker, for kvscope's own sessions, opened traces and
// captures of other engines alike (docs/architecture.md, "The cache
// contract, for any engine"). It replays a record's cache event log in the
// order the operations happened and checks the contract after each event:
// every layer holds exactly the rows the event's contract requires, each the
// token of the stream at its own position, rotated for that position
// (row_identity.h); a forward attended no pad row (a padded batch's left
// padding, which every mask must hide); a forward stored what it computed;
// then what only some
// records can show: a capture's attention mask and a lost cache, and the K/V
// of the rows a forward wrote against a reference forward. The first event
// that fails is the root cause. Everything after it may be its symptom, so
// nothing after it is ever named.
//
// What differs between a session and a capture is knowledge, not the walk:
// the token stream an event is judged against, the wrong rows an engine may
// keep because no later forward attends them, the checks of a forward only a
// capture records, the reference its values are compared with, and the words
// of the sentence. ContractRules carries that knowledge: sessions and traces
// use the rules in root_cause.h, captures those in core/check/capture_rules.h.
#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "core/audit/root_cause_report.h"
#include "core/trace/session_record.h"

namespace kvscope {

class ContractRules {
 public:
  virtual ~ContractRules() = default;

  // The tokens the cache must hold a prefix of after event `index`.
  virtual std::vector<int64_t> streamOf(size_t index) const = 0;
  // Ledger entries of wrong rows the engine may keep after event `index`
  // because the next forward of that cache hides them with its mask.
  virtual std::unordered_set<int64_t> hiddenRows(size_t /*index*/) const { return {}; }
  // A forward's breach beyond the rows it left (a capture's lost cache or
  // attention mask), complete with its sentence; nullopt when none.
  virtual std::optional<RootCause> forwardBreach(size_t /*index*/) { return std::nullopt; }
  // The rows event `index` wrote, against the reference forward, complete
  // with its sentence; nullopt when they agree or cannot be compared.
  virtual std::optional<RootCause> valueBreach(size_t /*index*/) { return std::nullopt; }
  // Names a breach of the rows (or of what a forward stored): sets
  // cause.kind and cause.what.
  virtual void describe(RootCause& cause) const = 0;
};

// The first event of `record` after which the contract fails, or nullopt.
std::optional<RootCause> walkContract(const SessionRecord& record, ContractRules& rules);

// A root cause at event `index` with the event's own fields filled in.
RootCause causeAtEvent(const CacheEvent& event, size_t index);

}  // namespace kvscope
