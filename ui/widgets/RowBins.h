#pragma once
// How a heatmap shows more rows than it has pixel lines: consecutive rows are
// grouped into bins of `rows_per_bin` rows, one bin per drawn line, and a bin
// shows, per column, the value of largest magnitude among its rows (signed, so
// the diverging colour scale still reads; an outlier row is never averaged
// away). Bins start at multiples of rows_per_bin, so panning never regroups
// rows. Every row of the range falls in exactly one bin (the last one may be
// short): no row is dropped. A bin's marks are the union of its rows': a bin
// with any stale / duplicate / wrong row carries that verdict's mark.
// Plain C++ over the snapshot's CacheMatrix (unit-tested without widgets).
#include <vector>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

struct RowBinning {
  int rows = 0;          // rows of the whole matrix
  int first_row = 0;     // first row of bin 0 (a multiple of rows_per_bin)
  int rows_per_bin = 1;  // 1: one line per row, nothing aggregated
  int bins = 0;

  bool aggregated() const { return rows_per_bin > 1; }
  int binFirst(int bin) const { return first_row + bin * rows_per_bin; }
  // One past the bin's last row (the last bin stops at the matrix's end).
  int binEnd(int bin) const;
  int binCount(int bin) const { return binEnd(bin) - binFirst(bin); }
  // The bin holding `row` (-1 outside the binned range).
  int binOf(int row) const;
};

// Bins for the rows visible in [lower, upper] (row coordinates: row r spans
// r - 0.5 .. r + 0.5) drawn on `pixels` pixel lines.
RowBinning binRows(int rows, double lower, double upper, int pixels);

// What one bin shows besides its values.
struct BinMarks {
  RowState state = RowState::Ok;  // the worst verdict among its rows (Ok: all rows ok)
  int bad = 0;                    // rows whose verdict is not Ok
  bool written = false;           // some row was written this round
  bool pruned = false;            // some row was removed this round
  int masked = 0;                 // rows an eviction policy masked in the shown kv head
  int rows = 0;                   // rows in the bin
};

// [bins, cols] row-major: per bin and column, the value of largest |x| of its rows.
std::vector<float> binValues(const CacheMatrix& matrix, const RowBinning& binning);
std::vector<BinMarks> binMarks(const CacheMatrix& matrix, const RowBinning& binning);

}  // namespace kvscope::ui
