#pragma once
// Token-eviction policies: which cache rows each kv head keeps under a budget.
// A policy is a row of core/cache/eviction_policy_table.h (its name, options,
// and whether it needs attention) and a scorer (core/cache/eviction_scores.h)
// under the shared selection (core/cache/row_selection.h):
//   streaming  the first `sinks` rows (default 4) and the most recent rows
//   h2o        attention received, summed over every query seen; the most
//              recent `window` rows (default half the budget) always kept
//   snapkv     attention from the last `window` queries (default 16), summed,
//              max-pooled with `kernel` (default 5) before the window; the
//              window always kept
//   tova       the current query's attention; during decoding, every step
//              over budget removes the lowest-weighted row
//   knorm      the rows whose key has the lowest L2 norm
//   random     seeded uniform scores
//   pyramid    snapkv scores under per-layer budgets decreasing linearly from
//              the first layer to the last, with the same mean (PyramidKV)
// A policy only decides; the cache applies the decision as a keep mask
// (core/cache/cache_compression.h; a tracked cache logs it, TrackedCache::evict).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/eviction_settings.h"

namespace kvscope {

// What a policy may read about one layer's rows [0, T).
struct LayerEvidence {
  int64_t layer = 0;
  at::Tensor keys;       // [kv_heads, T, head_dim] as the cache holds them
  at::Tensor attention;  // [heads, n, T] weights of the n queries seen; undefined when not needed
  // [kv_heads, T] bool: rows each kv head still reads (an earlier eviction
  // masked the others); undefined: every row. A re-compression keeps its
  // budget among these: a masked row ranks below every held one.
  at::Tensor held;
};

struct LayerEviction {
  at::Tensor keep;    // [kv_heads, T] bool: rows kept
  at::Tensor scores;  // [kv_heads, T] float32: the policy's score (higher = more worth keeping)
};

// The policy's score of every row of one layer: [kv_heads, T] float32, higher
// = more worth keeping. `window`: snapkv's observation window (queries).
at::Tensor scoreRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t window);

// Decides one layer: `keep_rows` rows per kv head (the layer's budget; for
// pyramid, its entry of pyramidBudgets). Throws Error for a snapkv or pyramid
// window longer than the queries seen.
LayerEviction chooseRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t keep_rows);

// The rows each layer keeps: budget.rowsOf(rows) everywhere, or pyramid's
// linearly decreasing budgets with that mean.
std::vector<int64_t> layerBudgets(const EvictionSettings& settings, int64_t layers, int64_t rows);

}  // namespace kvscope
