#pragma once
// The sequences of one batched forward, laid end to end. Sequence i's tokens
// are rows [offset(i), offset(i) + count(i)) of the batch's activations
// [N, hidden]: the dense layers (projections, MLP, head) run on all N rows at
// once, so a decode step of 8 sequences reads every weight once instead of 8
// times; attention runs per sequence, over that sequence's own cache, at its
// own positions. Sequences of different lengths and different numbers of new
// tokens share a forward as they are (a serving engine's "ragged" batch), so
// no mask has to hide rows of other sequences. A padded batch
// (core/decode/forward_batcher.h with a pad token) evens every sequence's
// inputs to the call's width with pad tokens: before the inputs at a
// prefill (the prompt left-padded; the rows become the cache's pad rows),
// after them later (rows dropped right after the forward). Pads are rotated
// for position 0, give no logits, and attention hides them from the
// sequence's real queries (docs/batching.md, "The padded layout").
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/kv_cache.h"
#include "core/model/probe.h"

namespace kvscope {

// The pads a padded batch added to one sequence's inputs.
struct AddedPadding {
  int64_t before = 0;  // pad tokens before the inputs (a left-padded prefill)
  int64_t after = 0;   // pad tokens after them (rows to drop after the forward)
  int64_t token = 0;   // the pad token id
};

// One sequence's part of a forward (CausalLM::forward's arguments).
struct SequenceForward {
  at::Tensor tokens;         // [n] int64 ids at positions start_pos .. start_pos + n - 1
  int64_t start_pos = 0;
  KvCache* cache = nullptr;  // this sequence's cache; nullptr: no cache (start_pos 0)
  ProbeSink* probes = nullptr;
  int64_t logit_rows = -1;   // logits of the last logit_rows tokens; -1: all
  bool unchecked = false;    // as CausalLM::forwardUnchecked: the cache's length need not be start_pos
  // The pad tokens among `tokens` (a padded batch's); the real inputs sit
  // between them, at positions start_pos ...
  AddedPadding pads;
  // Non-null: a padded batch may pad this forward, and notes here what it
  // added. Null: never padded (a forward outside a padded batch's books).
  AddedPadding* padding_out = nullptr;

  int64_t realCount() const { return tokens.size(0) - pads.before - pads.after; }
};

class BatchRows {
 public:
  explicit BatchRows(std::vector<SequenceForward> sequences);

  size_t size() const { return sequences_.size(); }
  const SequenceForward& operator[](size_t i) const { return sequences_[i]; }
  int64_t total() const { return offsets_.back(); }  // N
  int64_t offset(size_t i) const { return offsets_[i]; }
  int64_t count(size_t i) const { return offsets_[i + 1] - offsets_[i]; }

  // [N] every sequence's tokens, in batch order.
  at::Tensor tokens() const;
  // [n_i] the positions of sequence i's tokens (0 for its pads).
  at::Tensor positionsOf(size_t i) const;
  // The position of sequence i's r-th token (0 for a pad).
  int64_t positionOf(size_t i, int64_t r) const;
  // Sequence i's rows of x along `dim` (a view).
  at::Tensor rowsOf(const at::Tensor& x, size_t i, int64_t dim = 0) const;
  // Records each sequence's rows of x (along `dim`) into its own probes.
  void probeEach(Probe point, int64_t layer, const at::Tensor& x, int64_t dim = 0) const;
  // x [N, hidden] -> the rows each sequence wants logits of, in batch order
  // ([sum of logit rows, hidden]).
  at::Tensor logitRows(const at::Tensor& x) const;
  // How many logit rows sequence i gets (of logitRows' result): its last
  // real inputs', never a pad's.
  int64_t logitCount(size_t i) const;
  // The batch row of sequence i's first logit row (in x [N, hidden]).
  int64_t firstLogitRow(size_t i) const;
  // logits [sum of logit rows, vocab] -> one tensor per sequence (views).
  std::vector<at::Tensor> splitLogits(const at::Tensor& logits) const;

  // Joins per-sequence tensors along `dim`; a batch of one returns its only
  // part itself, so a single sequence's forward is the unbatched one, bit
  // for bit and without a copy.
  static at::Tensor join(const std::vector<at::Tensor>& parts, int64_t dim);

 private:
  std::vector<SequenceForward> sequences_;
  std::vector<int64_t> offsets_;  // [size + 1] prefix sums of the token counts
};

}  // namespace kvscope
