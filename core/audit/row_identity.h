#pragma once
// Row identity against the bookkeeping: for one layer's physical rows (ledger
// entries in row order), which hold the token of the stream at their own slot,
// computed for that position with that rotary position (ok), which should
// have been removed (stale), which are a second copy (duplicate) or in the
// wrong slot or rotated for the wrong position (wrong_position), and which
// expected positions no row holds (missing). Values are the audit's business
// (cache_audit.h); this part is torch-free so the GUI can mark rows too.
#include <cstdint>
#include <vector>

#include "core/audit/audit_report.h"
#include "core/cache/cache_event_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// One verdict per physical row (in row order), then one per missing position.
// The layer must hold positions [contract.first, contract.end) of the stream,
// position p in row p - contract.first (a sliding window starts past 0),
// after the pad rows a left-padded sequence's layer begins with (state
// padding: they hold no position).
std::vector<RowVerdict> classifyRows(const std::vector<LedgerEntry>& entries, CacheRole cache, int64_t layer,
                                     const std::vector<int64_t>& rows, const RowContract& contract,
                                     const std::vector<int64_t>& stream);

// The verdicts of classifyRows that break the contract (neither ok nor padding), by row; at one row a
// missing position first: when a window evicts too early, the lost position
// explains the rows that moved up after it. The root cause of a session and
// of a capture name these.
std::vector<RowVerdict> brokenRows(const std::vector<LedgerEntry>& entries, CacheRole cache, int64_t layer,
                                   const std::vector<int64_t>& rows, const RowContract& contract,
                                   const std::vector<int64_t>& stream);

}  // namespace kvscope
