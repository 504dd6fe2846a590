#pragma once
// Compression decisions and how a KvCache takes them. An eviction policy
// (core/cache/eviction_policy.h) only decides: which rows each (layer, kv
// head) keeps (EvictionDecision). Applying a decision masks those rows
// (KvCache::evictRows) or demotes them; element pruning
// (core/cache/element_pruning.h) zeroes stored entries. A tracked cache
// applies both through its own methods, which log what they removed
// (TrackedCache::evict, TrackedCache::compress); the functions here that
// take a mutable KvCache are what those methods run on their storage, and
// what a caller with an untracked cache (a test) uses.
#include <cstdint>
#include <optional>
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

// What an eviction policy decided for every layer of a cache.
struct EvictionDecision {
  std::vector<at::Tensor> keep;    // per layer [kv_heads, length] bool: the rows each kv head keeps
  std::vector<at::Tensor> scores;  // per layer [kv_heads, length] float32: the policy's score of every row
  int64_t step = -1;               // as RemovedRow::step
};

// The decision of `settings`' policy for every layer of `cache`: budgets[layer]
// rows per kv head. attention[layer]: [heads, n, length] weights of the
// queries seen (needed by the attention-based policies; may be empty
// otherwise). Rows already masked rank last. Reads the cache only. Throws
// Error for a layer whose rows do not start at position 0 (a sliding window's).
EvictionDecision decideEviction(const KvCache& cache, const EvictionSettings& settings,
                                const std::vector<at::Tensor>& attention, const std::vector<int64_t>& budgets);

// A decode step of a policy that evicts per step (evictsPerStep: tova): in
// every layer and kv head holding more rows than the budget allows for the
// layer's current length (budget.rowsOf(length): a fraction grows with the
// sequence, a count does not), the kept row the policy scores lowest goes
// (tova: the lowest weight from the current query, attention[layer]:
// [heads, 1, length]). Reads the cache only. Throws Error for a policy that
// does not evict per step.
EvictionDecision decideDecodeStep(const KvCache& cache, const EvictionSettings& settings,
                                  const std::vector<at::Tensor>& attention, int64_t step);

struct PolicyEviction {
  std::vector<RemovedRow> removed;  // evicted, or demoted when demote_bits > 0
  std::vector<at::Tensor> scores;   // per layer [kv_heads, length] float32: the policy's score of every row
  std::vector<at::Tensor> demoted;  // per layer [kv_heads, length] bool: rows now low-precision copies
  double demote_max_error = 0;      // max |x - q(x)| over the demoted K and V entries
};

// Takes `decision` on `cache`: the rows a kv head still reads and the
// decision drops are masked, or, with demote_bits (8 or 4), overwritten with
// their quantised copies (core/cache/row_demotion.h) and left visible.
PolicyEviction applyEviction(KvCache& cache, const EvictionDecision& decision, int64_t demote_bits);

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

// A compression of a cache just prefilled (rows at positions 0..n-1 in every
// layer): token eviction and/or element pruning, with what they score with.
struct CompressionRequest {
  std::optional<EvictionSettings> eviction;  // token eviction (or demotion), at budgets of the prefill's rows
  std::optional<PruneSettings> pruning;      // element pruning, among the rows the eviction left
  std::vector<at::Tensor> attention;         // per layer [heads, n, T]: the prefill's weights; may be empty
  std::vector<at::Tensor> queries;           // per layer [heads, n, head_dim]: output-aware pruning's
};

struct CompressionOutcome {
  std::vector<int64_t> layer_budgets;  // rows kept per kv head, per layer (eviction)
  std::vector<RemovedRow> removed;     // evicted, or demoted with demote_bits
  std::vector<at::Tensor> scores;      // per layer [kv_heads, rows]: the eviction policy's score of every row
  std::vector<at::Tensor> demoted;     // per layer [kv_heads, rows] bool: rows kept as low-precision copies
  double demote_max_error = 0;         // max |x - q(x)| over the demoted K and V entries
  PrunedElements pruned;
};

// The eviction's decision taken (applyEviction), then the pruning.
CompressionOutcome compressCache(KvCache& cache, const CompressionRequest& request);

}  // namespace kvscope
