#pragma once
// Token eviction inside a running session: a policy
// (core/cache/eviction_policy.h) compresses the target's cache after the
// prefill and, optionally, after every N-th round's prune. It acts through
// the cache's keep mask (rows stay where they are, masked per layer and kv
// head), so row counts, crops and the speculative bookkeeping are untouched;
// the session logs each compression as one Evict event naming every masked
// (entry, layer, kv head) with its score (core/cache/eviction_masks.h).
//
// Only the target's cache is compressed: the drafter is a separate model with
// its own cache, and verification over the compressed target decides what is
// emitted. Removed rows keep the rotary position they were written with (as
// kvpress does). A session's caches never compact or re-rotate (the event log
// and trace replay rely on rows not moving); the drafting copy of
// compressed-cache self-speculation does (core/compress/self_speculation_drafter.h).
#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/eviction_settings.h"

namespace kvscope {

struct SessionEviction {
  EvictionSettings settings;
  // 0: compress after the prefill only; N > 0: also after every N-th round's prune.
  int64_t recompress_every = 0;

  // Throws Error naming --evict and the bad part.
  void validate() const;
  // "h2o:0.25:every=4" (the form parseSessionEviction reads).
  std::string describe() const;
};

// Parses "POLICY:BUDGET[:every=N][:sinks=N][:window=N][:kernel=K][:seed=S]";
// BUDGET is a fraction in (0, 1] ("0.25", "1.0") or a row count ("48").
// Throws Error("--evict must be ..., got '...'") on anything else.
SessionEviction parseSessionEviction(const std::string& text);

}  // namespace kvscope
