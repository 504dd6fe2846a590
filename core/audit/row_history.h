#pragma once
// A cache row's history, like RenderDoc's pixel history: every logged cache
// operation that touched one ledger entry in one layer, in order: the append
// that wrote it (where, for which position, with which rotary position), the
// crops, resets and evictions that kept it, moved it or removed it (and why),
// appends that wrote another row for its position, what an injected fault
// did, and the eviction policy's Evict events that masked it in some of the
// layer's kv heads (the row stays where it is; those heads stop reading it).
// With the token stream of each round, each item also carries the row's
// verdict against the bookkeeping after the operation (stale, duplicate, ...).
// Given the root cause, the operations after it say so: a row wrong after it,
// or written after it, follows from it and is not a cause of its own.
// Torch-free: the GUI draws it from snapshots, the CLI prints it. The only
// row history; the GUI adds the attention the row received.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/audit/audit_report.h"
#include "core/audit/root_cause_report.h"
#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// What an operation did to the row.
enum class RowEffect {
  Born,      // the append that wrote it
  Kept,      // a crop / reset / eviction that left it in place
  Moved,     // an operation after which it sits in another physical row
  Removed,   // the operation that removed it from this layer
  Rivalled,  // an append that wrote another row for its position
  Masked,    // an eviction policy masked it in some kv heads (it stays in its row)
};
const char* rowEffectName(RowEffect effect);

struct RowHistoryItem {
  int64_t entry = -1;       // the ledger entry whose history this is
  int64_t event_index = 0;  // into the event log
  Moment moment;
  CacheEventKind operation = CacheEventKind::Append;
  RowEffect effect = RowEffect::Born;
  int64_t row_after = -1;         // the entry's physical row in the layer after the event (-1: not held)
  RowState state = RowState::Ok;  // its verdict after the event (Ok when no stream was given)
  int64_t expected_rows = 0;      // the rows the layer had to hold after the event
  std::string what;               // what happened to this row, one line for people
  std::string event_text;         // the operation itself in one line (describeEvent, without the fault)
  std::string fault_action;
  // A policy's Evict: the policy, and the kv heads of this layer it masked
  // the row in, with the policy's score of the row in each.
  std::string policy;
  std::vector<int64_t> kv_heads;
  std::vector<double> scores;
  // Where the operation stands to the root cause: it is the root cause, or it
  // came after it (what it did may follow from it); empty without one.
  std::string root_cause_relation;  // "", "root cause", "after the root cause"
  std::string root_cause_note;      // that in words ("follows from the root cause, ..."); also ends `what`
};

// The token stream the bookkeeping of `round` refers to (streamOfRound).
using RoundStream = std::function<std::vector<int64_t>(int64_t round)>;

// The history of `entry` in `layer`; without `stream`, every state is Ok.
// With `root_cause` (its event_index into `events`), items say how they stand to it.
std::vector<RowHistoryItem> rowHistory(const std::vector<LedgerEntry>& entries, const CacheEventLog& events,
                                       int64_t entry, int64_t layer, const RoundStream& stream = {},
                                       const RootCause* root_cause = nullptr);

nlohmann::json toJson(const RowHistoryItem& item);

}  // namespace kvscope
