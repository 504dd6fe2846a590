#pragma once
// Applying compression decisions to a real KvCache: eviction policies
// (core/cache/eviction_policy.h) through the cache's keep mask, element
// pruning (core/cache/element_pruning.h) by zeroing stored entries. Each call
// returns what it removed, so a caller can record it (the compression lab
// keeps them in its result; a Session would log them as Evict events).
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/element_pruning.h"
#include "core/cache/eviction_policy.h"
#include "core/cache/kv_cache.h"

namespace kvscope {

// One row an eviction policy removed.
struct RemovedRow {
  int64_t layer = 0;
  int64_t kv_head = 0;
  int64_t position = 0;
  double score = 0;   // the policy's score for the row (higher = more worth keeping)
  int64_t step = -1;  // -1: the prefill compression; else the decode step after which it went (tova)
};

struct PolicyEviction {
  std::vector<RemovedRow> removed;  // evicted, or demoted when settings.demote_bits > 0
  std::vector<at::Tensor> scores;   // per layer [kv_heads, length] float32: the policy's score of every row
  std::vector<at::Tensor> demoted;  // per layer [kv_heads, length] bool: rows now low-precision copies
  double demote_max_error = 0;      // max |x - q(x)| over the demoted K and V entries
};

// Evicts every layer of `cache` down to budgets[layer] rows per kv head (or,
// with settings.demote_bits, overwrites the other rows with their quantised
// copies, core/cache/row_demotion.h, and leaves them visible).
// attention[layer]: [heads, n, length] weights of the queries seen (needed by
// the attention-based policies; may be empty otherwise). Throws Error for a
// layer whose rows do not start at position 0 (a sliding window's).
PolicyEviction evictByPolicy(KvCache& cache, const EvictionSettings& settings, const std::vector<at::Tensor>& attention,
                             const std::vector<int64_t>& budgets);

// TOVA's decode step: in every layer and kv head holding more rows than the
// budget allows for the layer's current length (budget.rowsOf(length): a
// fraction grows with the sequence, a count does not), removes the kept row
// with the lowest weight from the current query (attention[layer]:
// [heads, 1, length]).
std::vector<RemovedRow> tovaStep(KvCache& cache, const std::vector<at::Tensor>& attention,
                                 const EvictionBudget& budget, int64_t step);

struct PrunedElements {
  int64_t k = 0;  // entries zeroed
  int64_t v = 0;
  std::vector<at::Tensor> k_keep;  // per layer [kv_heads, length, head_dim] bool
  std::vector<at::Tensor> v_keep;
};

// Zeroes the entries element pruning drops in every layer, among the rows
// attention still reads (after an eviction, the kept rows). queries[layer]
// ([heads, n, head_dim]) and attention[layer] ([heads, n, length]) are
// needed for output-aware scores; their last settings.query_window queries
// weigh the entries.
PrunedElements pruneElements(KvCache& cache, const PruneSettings& settings, const std::vector<at::Tensor>& queries,
                             const std::vector<at::Tensor>& attention);

}  // namespace kvscope
