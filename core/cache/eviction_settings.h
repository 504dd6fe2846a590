#pragma once
// What an eviction policy is asked to do: which policy, under what budget,
// with its knobs. Plain data without tensors, so that options (the session's,
// the GUI's forms, lesson files) can name an eviction without pulling in
// libtorch; the policies are rows of core/cache/eviction_policy_table.h and
// their scorers are in core/cache/eviction_policy.h.
#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/eviction_policy_table.h"

namespace kvscope {

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
  // After the prefill only; refused for a policy whose decode steps evict (tova).
  int64_t demote_bits = 0;

  // Throws Error naming the option (--budget, --sinks, ...) and its valid range.
  void validate() const;
  // The recent rows always kept for a layer budget of `keep` rows and a
  // prompt of `queries` queries: a window of recent rows (h2o's; default
  // keep / 2), of the last queries (snapkv's; default 16, at most the
  // queries), 0 for a policy without a window.
  int64_t recentWindow(int64_t keep, int64_t queries) const;
};

}  // namespace kvscope
