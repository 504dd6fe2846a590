#include "ui/widgets/RowBins.h"

#include <algorithm>
#include <cmath>

#include "ui/context/RowLookup.h"

namespace kvscope::ui {

int RowBinning::binEnd(int bin) const { return std::min(rows, binFirst(bin) + rows_per_bin); }

int RowBinning::binOf(int row) const {
  if (row < first_row || row >= rows || rows_per_bin <= 0) return -1;
  const int bin = (row - first_row) / rows_per_bin;
  return bin < bins ? bin : -1;
}

RowBinning binRows(int rows, double lower, double upper, int pixels) {
  RowBinning binning;
  binning.rows = std::max(rows, 0);
  if (binning.rows == 0) return binning;
  // Rows at least partly inside [lower, upper]: r - 0.5 < upper and r + 0.5 > lower.
  const int first = std::clamp(static_cast<int>(std::floor(lower + 0.5)), 0, binning.rows - 1);
  const int end = std::clamp(static_cast<int>(std::ceil(upper + 0.5)), first + 1, binning.rows);
  // At least one pixel line per bin; the epsilon keeps 600 rows on 600 pixels at one row per line.
  const double rows_per_pixel = (upper - lower) / std::max(pixels, 1);
  binning.rows_per_bin = std::max(1, static_cast<int>(std::ceil(rows_per_pixel - 1e-9)));
  binning.first_row = first / binning.rows_per_bin * binning.rows_per_bin;
  binning.bins = (end - binning.first_row + binning.rows_per_bin - 1) / binning.rows_per_bin;
  return binning;
}

std::vector<float> binValues(const CacheMatrix& matrix, const RowBinning& binning) {
  const size_t cols = static_cast<size_t>(matrix.cols);
  std::vector<float> out(static_cast<size_t>(binning.bins) * cols, 0.0f);
  for (int b = 0; b < binning.bins; ++b) {
    float* line = out.data() + static_cast<size_t>(b) * cols;
    for (int r = binning.binFirst(b); r < binning.binEnd(b); ++r) {
      const float* row = matrix.values.data() + static_cast<size_t>(r) * cols;
      for (size_t c = 0; c < cols; ++c) {
        if (r == binning.binFirst(b) || std::fabs(row[c]) > std::fabs(line[c])) line[c] = row[c];
      }
    }
  }
  return out;
}

std::vector<BinMarks> binMarks(const CacheMatrix& matrix, const RowBinning& binning) {
  std::vector<BinMarks> out(static_cast<size_t>(binning.bins));
  for (int b = 0; b < binning.bins; ++b) {
    BinMarks& marks = out[static_cast<size_t>(b)];
    for (int r = binning.binFirst(b); r < binning.binEnd(b); ++r) {
      const ViewRow& row = matrix.rows[static_cast<size_t>(r)];
      marks.written = marks.written || row.status == RowStatus::Written || row.status == RowStatus::WrittenPruned;
      marks.pruned = marks.pruned || row.status == RowStatus::Pruned || row.status == RowStatus::WrittenPruned;
      ++marks.rows;
      if (row.masked_by >= 0) ++marks.masked;
      if (row.state == RowState::Ok) continue;
      ++marks.bad;
      if (verdictSeverity(row.state) > verdictSeverity(marks.state)) marks.state = row.state;
    }
  }
  return out;
}

}  // namespace kvscope::ui
