#pragma once
// The reference forward of every token stream a capture's check compares
// with, computed once per position: the streams of a run share the committed
// sequence C and differ only in their drafts, so C's positions are computed
// once, incrementally, in one KV cache, and each stream's drafts as a short
// continuation of the committed prefix it shares with C (then cut off again).
// Recomputing each stream from scratch made a check quadratic in the run's
// length (400 tokens of the bundled pair: 4.8x the run).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/kv_cache.h"
#include "core/capture/capture_manifest.h"
#include "core/model/causal_lm.h"

namespace kvscope {

// The reference rows of one stream: position p < split from the committed
// sequence's chunks, the rest from the stream's own continuation.
class StreamReference {
 public:
  // Consecutive positions' rows and logits from one forward.
  struct Chunk {
    int64_t start = 0;
    std::vector<at::Tensor> keys, values;  // per layer [kv_heads, n, head_dim]
    at::Tensor logits;                     // [n, vocab]
  };

  int64_t length() const { return length_; }
  // [kv_heads, head_dim] float32 of `layer` at `position` (< length()).
  at::Tensor key(int64_t layer, int64_t position) const;
  at::Tensor value(int64_t layer, int64_t position) const;
  // [vocab] float32 logits of the token at `position` (predicting the next).
  at::Tensor logits(int64_t position) const;

 private:
  friend class ReferenceStreams;
  const Chunk& chunkOf(int64_t position) const;

  std::shared_ptr<const std::vector<Chunk>> committed_;  // C's positions, in order
  int64_t split_ = 0;
  Chunk continuation_;
  int64_t length_ = 0;
};

class ReferenceStreams {
 public:
  ReferenceStreams(const CausalLM& model, std::vector<int64_t> committed);
  // The reference of `stream` (any token sequence); computes what no earlier
  // stream computed.
  StreamReference of(const std::vector<int64_t>& stream);

 private:
  void extendCommitted(int64_t end);  // C's positions [0, end) known and in the cache

  const CausalLM& model_;
  std::vector<int64_t> committed_tokens_;
  std::unique_ptr<KvCache> cache_;  // holds C[0, cache_->length())
  std::shared_ptr<std::vector<StreamReference::Chunk>> chunks_;
  int64_t known_ = 0;  // C's positions whose rows and logits are in chunks_
};

// The references of one capture's streams, per role: made once and shared
// by the check of the rows (capture_rules.h) and of the logits (capture_check.h).
class CaptureReferences {
 public:
  // models: per CaptureRole, null where that role is not compared.
  CaptureReferences(std::array<const CausalLM*, kCaptureRoles> models, const std::vector<int64_t>& committed,
                    const std::vector<std::vector<int64_t>>& streams);
  bool has(CaptureRole role) const { return models_[static_cast<size_t>(role)] != nullptr; }
  // The reference of stream `stream` (an index into the timeline's streams); null without a model.
  const StreamReference* ofStream(CaptureRole role, int64_t stream);
  // The reference of any token sequence (requires a model).
  StreamReference of(CaptureRole role, const std::vector<int64_t>& tokens);

 private:
  ReferenceStreams& streamsOf(CaptureRole role);

  std::array<const CausalLM*, kCaptureRoles> models_;
  const std::vector<int64_t>& committed_;
  const std::vector<std::vector<int64_t>>& streams_;
  std::unique_ptr<ReferenceStreams> references_[kCaptureRoles];
  std::map<std::pair<int, int64_t>, StreamReference> made_;  // (role, stream) -> its reference
};

}  // namespace kvscope
