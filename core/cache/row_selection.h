#pragma once
// The selection step every eviction policy shares (as kvpress separates its
// scorers from one top-k): given one score per (kv head, row), keep a budget
// of rows per kv head. Pure functions on tensors, so each can be checked on
// hand-computed cases.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

struct RowSelection {
  int64_t keep = 0;    // rows kept per kv head (clamped to [0, T])
  int64_t first = 0;   // the first rows, kept whatever their score (StreamingLLM's sinks)
  int64_t recent = 0;  // the last rows, kept whatever their score (an observation window)
};

// scores: [kv_heads, T], higher = more worth keeping. Returns keep
// [kv_heads, T] bool: per kv head the first `first` rows, then the last
// `recent` rows, then the best-scored of the others, `keep` rows in all (the
// protected rows are cut back first when they alone exceed it, `first` before
// `recent`). On equal scores the earlier position is kept.
at::Tensor keepBest(const at::Tensor& scores, const RowSelection& selection);

// Per kv head, the row to remove next: the lowest score among the rows `keep`
// ([kv_heads, T] bool) still holds; on equal scores the later position goes
// (the earlier one is kept, as in keepBest). -1 for a head with no kept row.
std::vector<int64_t> lowestKept(const at::Tensor& scores, const at::Tensor& keep);

// PyramidKV's per-layer budgets: decreasing linearly from the first layer to
// the last, with mean `mean_rows` (every layer's row count rounded so that
// they sum to layers * mean_rows), and none above `rows` (the layer length)
// or below 1. The slope is the largest up to `max_spread` (the top layer gets
// mean * (1 + spread), the bottom mean * (1 - spread)) that stays under
// `rows`. PyramidKV's own default (beta 20) is a spread of 0.95.
std::vector<int64_t> pyramidBudgets(int64_t mean_rows, int64_t layers, int64_t rows, double max_spread = 0.95);

}  // namespace kvscope
