#pragma once
// Token-eviction policies: which cache rows each kv head keeps under a budget.
// A policy is a scorer (core/cache/eviction_scores.h) plus the shared
// selection (core/cache/row_selection.h), exactly as issue 11 defines them:
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
// The cache applies the decision as a keep mask (KvCache::evictRows).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

enum class EvictionPolicy { Streaming, H2O, SnapKV, Tova, Knorm, Random, Pyramid };
const char* evictionPolicyName(EvictionPolicy policy);
// Throws Error listing the valid names.
EvictionPolicy parseEvictionPolicy(const std::string& name);
std::vector<EvictionPolicy> allEvictionPolicies();
// Whether the policy's scores come from attention weights (so the caller
// must record them during the prefill).
bool needsAttention(EvictionPolicy policy);

// How many rows a kv head keeps: a fraction of its rows, or a count.
struct EvictionBudget {
  double fraction = 1.0;  // in (0, 1]; used when rows == 0
  int64_t rows = 0;       // > 0: this many rows (at most the layer's length)
  // The rows kept of a layer of `length` rows: round(fraction * length), at
  // least 1, or min(rows, length).
  int64_t rowsOf(int64_t length) const;
};

struct EvictionSettings {
  EvictionPolicy policy = EvictionPolicy::Streaming;
  EvictionBudget budget;
  int64_t sinks = 4;    // streaming
  int64_t window = -1;  // h2o / snapkv / pyramid; -1: the policy's default
  int64_t kernel = 5;   // snapkv / pyramid, odd
  uint64_t seed = 0;    // random
  // 0: the rows a policy drops are evicted (hidden from attention). 8 or 4:
  // demoted instead (MiKV): kept as int8 / int4 copies, still attended to.
  // After the prefill only; refused for tova, whose decode steps evict.
  int64_t demote_bits = 0;

  // Throws Error naming the option (--budget, --sinks, ...) and its valid range.
  void validate() const;
  // The recent rows always kept for a layer budget of `keep` rows and a
  // prompt of `queries` queries: h2o's window (default keep / 2), snapkv's
  // (default 16, at most the queries), 0 for the others.
  int64_t recentWindow(int64_t keep, int64_t queries) const;
};

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

// Decides one layer: `keep_rows` rows per kv head (the layer's budget; for
// pyramid, its entry of pyramidBudgets). Throws Error for a snapkv or pyramid
// window longer than the queries seen.
LayerEviction chooseRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t keep_rows);

// The rows each layer keeps: budget.rowsOf(rows) everywhere, or pyramid's
// linearly decreasing budgets with that mean.
std::vector<int64_t> layerBudgets(const EvictionSettings& settings, int64_t layers, int64_t rows);

}  // namespace kvscope
