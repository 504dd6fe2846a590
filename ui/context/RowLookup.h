#pragma once
// Finding rows by identity in a snapshot at a moment: which physical row an
// entry occupies, which entry a row or a position holds, and every row's
// verdict against the bookkeeping (missing rows included). Plain functions
// over the core's torch-free replay of the cache event log.
#include <cstdint>
#include <vector>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// The physical row of `entry` in `layer` just after `moment` (-1: not held).
int64_t rowOfEntry(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, const Moment& moment,
                   int64_t entry);
// The entry held by physical `row` (-1: none).
int64_t entryAtRow(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, const Moment& moment, int64_t row);
// The row holding `position`: the one with the token the bookkeeping expects
// there (a stale row for the same position loses), else the last one (-1: none).
int64_t entryAtPosition(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, const Moment& moment,
                        int64_t position);
// One verdict per physical row in row order, then one per missing row.
std::vector<RowVerdict> rowVerdicts(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer,
                                    const Moment& moment);
// How bad a verdict is, to show one colour for several rows (Ok: 0, stale: highest).
int verdictSeverity(RowState state);
// The token the bookkeeping expects at `position` during `round` (-1: none).
int64_t expectedToken(const SessionSnapshot& snapshot, int64_t round, int64_t position);

}  // namespace kvscope::ui
