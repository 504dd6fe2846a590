#pragma once
// The attention an eviction policy scores a session's cache by
// (core/decode/session_eviction.h): a probe sink that keeps the target's
// attention weights since the last compression.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/probe.h"

namespace kvscope {

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
