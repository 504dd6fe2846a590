#include "core/cache/row_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

namespace {

// Row indices of one head ordered best first; ties keep the earlier row first.
std::vector<int64_t> rankRows(const float* scores, int64_t rows) {
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  return order;
}

}  // namespace

at::Tensor keepBest(const at::Tensor& scores, const RowSelection& selection) {
  require(scores.dim() == 2, "keepBest: expected scores [kv_heads, T]");
  const int64_t heads = scores.size(0), rows = scores.size(1);
  const int64_t keep = std::clamp<int64_t>(selection.keep, 0, rows);
  const int64_t first = std::clamp<int64_t>(selection.first, 0, keep);
  const int64_t recent = std::clamp<int64_t>(selection.recent, 0, keep - first);
  const auto values = scores.to(torch::kFloat32).contiguous();  // [kv, T]
  auto kept = torch::zeros({heads, rows}, torch::kBool);         // [kv, T]
  auto* out = kept.data_ptr<bool>();
  for (int64_t h = 0; h < heads; ++h) {
    bool* row_kept = out + h * rows;
    std::fill(row_kept, row_kept + first, true);
    std::fill(row_kept + rows - recent, row_kept + rows, true);
    int64_t count = first + recent;
    for (int64_t r : rankRows(values.data_ptr<float>() + h * rows, rows)) {
      if (count == keep) break;
      if (row_kept[r]) continue;
      row_kept[r] = true;
      ++count;
    }
  }
  return kept;
}

std::vector<int64_t> lowestKept(const at::Tensor& scores, const at::Tensor& keep) {
  require(scores.dim() == 2 && keep.sizes() == scores.sizes(), "lowestKept: scores and keep must be [kv_heads, T]");
  const int64_t heads = scores.size(0), rows = scores.size(1);
  const auto values = scores.to(torch::kFloat32).contiguous();  // [kv, T]
  const auto held = keep.to(torch::kBool).contiguous();         // [kv, T]
  std::vector<int64_t> lowest(static_cast<size_t>(heads), -1);
  for (int64_t h = 0; h < heads; ++h) {
    const float* s = values.data_ptr<float>() + h * rows;
    const bool* k = held.data_ptr<bool>() + h * rows;
    for (int64_t r = 0; r < rows; ++r) {
      // <= : among equal scores the latest row is the one removed.
      if (k[r] && (lowest[h] < 0 || s[r] <= s[lowest[h]])) lowest[h] = r;
    }
  }
  return lowest;
}

std::vector<int64_t> pyramidBudgets(int64_t mean_rows, int64_t layers, int64_t rows, double max_spread) {
  require(layers >= 1 && rows >= 1, "pyramid budgets: need at least one layer and one row");
  const int64_t mean = std::clamp<int64_t>(mean_rows, 1, rows);
  if (layers == 1) return {mean};
  // Spread s: the first layer gets mean (1 + s), the last mean (1 - s); s
  // limited so the first fits in the layer and the last keeps a row.
  const double m = static_cast<double>(mean);
  const double spread = std::max(0.0, std::min({max_spread, static_cast<double>(rows) / m - 1.0, 1.0 - 1.0 / m}));
  std::vector<double> exact(static_cast<size_t>(layers));
  for (int64_t l = 0; l < layers; ++l) {
    exact[l] = m * (1.0 + spread * (1.0 - 2.0 * static_cast<double>(l) / static_cast<double>(layers - 1)));
  }
  // Round down, then give the missing rows to the largest remainders (the
  // earlier layer first on equal remainders) so the total is layers * mean.
  std::vector<int64_t> budgets(exact.size());
  int64_t total = 0;
  for (size_t l = 0; l < exact.size(); ++l) total += budgets[l] = static_cast<int64_t>(std::floor(exact[l] + 1e-9));
  std::vector<size_t> order(exact.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return exact[a] - static_cast<double>(budgets[a]) > exact[b] - static_cast<double>(budgets[b]);
  });
  for (size_t i = 0; total < layers * mean && i < order.size(); ++i, ++total) ++budgets[order[i]];
  for (int64_t& b : budgets) b = std::clamp<int64_t>(b, 1, rows);
  return budgets;
}

}  // namespace kvscope
