#pragma once
// Token eviction inside a running session (issue 11): a policy
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

#include <ATen/core/Tensor.h>

#include "core/cache/eviction_policy.h"
#include "core/model/probe.h"

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

// What the attention-scored policies read: the weights of the target's
// queries since the last compression (the prefill's, then the verify passes'
// queries of the tokens that were kept), passed through to another sink.
class EvictionEvidence : public ProbeSink {
 public:
  EvictionEvidence() = default;
  // Whether the next forward's attention is recorded, and the sink probes
  // pass through to. end_position: one past the forward's last query.
  void listen(bool attention, ProbeSink* inner, int64_t end_position);
  bool wants(Probe probe, int64_t layer) const override;
  void record(Probe probe, int64_t layer, const at::Tensor& value) override;

  // Drops the queries at positions >= end (a prune removed their tokens).
  void keepQueriesBefore(int64_t end);
  // Per layer l [heads, queries, rows[l]]: every recorded query's weights,
  // rows a query did not see (written after it) weighted 0. Empty when
  // nothing was recorded.
  std::vector<at::Tensor> attention(const std::vector<int64_t>& rows) const;
  int64_t queries() const;
  void clear() { chunks_.clear(); }

 private:
  struct Chunk {
    int64_t end_position = 0;         // one past its last query
    std::vector<at::Tensor> weights;  // per layer [heads, n, keys], float32
  };
  std::vector<Chunk> chunks_;
  int64_t firstPosition(const Chunk& chunk) const;
  static int64_t queriesOf(const Chunk& chunk);

  bool attention_ = false;
  ProbeSink* inner_ = nullptr;
};

}  // namespace kvscope
