#pragma once
// Per-layer K and V storage for one sequence (batch 1).
//
// Each layer holds K and V of shape [kv_heads, capacity, head_dim],
// preallocated and grown geometrically, plus a length: rows [0, length) are
// valid. Appending writes in place (no torch::cat per decode step); cropping
// only changes the length, so it is O(1) and crop(n) always keeps exactly n
// rows (unlike `[:-k]` slicing, where k = 0 wipes everything).
// Lengths are per layer because some real bugs crop only some layers, and
// sliding-window layers drop the rows that left their window from the front
// (evictFront): row r of a layer then holds position firstPosition + r.
//
// An eviction policy (core/cache/eviction_policy.h) removes rows per kv head,
// so heads of one layer keep different positions. It does so with a keep
// mask, not by moving rows: a removed row stays in storage, attention gives it
// no weight (the same attention as a cache without it), and row r still holds
// position firstPosition + r in every head. What a compacting cache would hold
// is the kept rows (keptRows).
//
// The drafting copy of compressed-cache self-speculation can compact
// instead: compact() gathers each kv head's kept rows to the front, so
// attention computes over them only. Rows then no longer hold one position
// per row index: rowPositions() says which position each row of each kv head
// holds (keys keep the rotary position they were written with), and rows
// appended later follow at the end with contiguous positions. Its tracked
// cache (TrackedCache::moveRows) keeps the books by position; every other
// cache of a Session never compacts: the audit and trace replay read rows by
// their place in the layout.
//
// A paged cache (made with a BlockPool and a sequence id) keeps the same
// lengths but stores its rows in the pool's fixed-size blocks through its own
// block table (core/cache/block_table.h), as serving engines do; several
// sequences share one pool. keys()/values() then gather the rows into a copy,
// and a crop frees the blocks past the kept rows. Keep masks, compaction,
// evictFront and renumberRows are not supported by that layout yet and throw
// Error. docs/paged-cache.md describes the layout.
//
// A sequence of a padded batch (docs/batching.md, "The padded layout") may
// begin with pad rows: a prompt left-padded to the batch's longest, as
// Hugging Face generate with padding_side="left" does. Rows [0, padRows())
// of every layer are padding and hold no position; row padRows() + r holds
// position r, so firstPosition() is -padRows() and positions (endPosition,
// crops by position) stay the sequence's own. Attention hides the pad rows
// from every real query while masksPadding() (a fault clears it).
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

namespace kvscope {

class BlockPool;
class BlockTable;

class KvCache {
 public:
  KvCache(int64_t num_layers, int64_t kv_heads, int64_t head_dim, c10::TensorOptions storage,
          int64_t initial_capacity = 64);
  // A paged cache of sequence `sequence` in `pool` (its shape and storage
  // dtype are the pool's). Sequences sharing a pool need distinct ids.
  KvCache(std::shared_ptr<BlockPool> pool, int64_t sequence);

  // Whether rows live in a block pool (false: one [kv_heads, capacity, head_dim] tensor per layer).
  bool paged() const { return paged_ != nullptr; }
  // The paged cache's block table (pool, blocks, fault switches); nullptr when contiguous.
  BlockTable* blockTable() const { return paged_.get(); }

  int64_t numLayers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t kvHeads() const { return kv_heads_; }
  int64_t headDim() const { return head_dim_; }
  c10::ScalarType storageDtype() const { return storage_.dtype().toScalarType(); }

  // Valid rows of layer 0; see uniformLength() when layers may differ.
  int64_t length() const { return length(0); }
  int64_t length(int64_t layer) const;
  // True when every layer holds the same number of rows.
  bool uniformLength() const;
  // Rows the layer can hold before growing (paged: the rows its mapped blocks hold).
  int64_t capacity(int64_t layer) const;
  // Positions dropped from the front of a layer (by evictFront) since the last
  // clear: row 0 holds this position. 0 for layers that never evict;
  // -padRows() for a left-padded cache (its pad rows come before position 0).
  int64_t firstPosition(int64_t layer) const;
  // The position the layer's next appended row is written for.
  int64_t endPosition(int64_t layer) const;

  // Writes k, v ([kv_heads, n, head_dim]) at rows [length, length + n) of the
  // layer and advances its length by n.
  void append(int64_t layer, const at::Tensor& k, const at::Tensor& v);

  // A layer's rows in place, for the lean forward (core/model/llama_lean_forward.cpp),
  // which writes and reads them without a tensor call: append, keys, values
  // and keepMask cost some 15 us per layer in ATen calls, a fifth of the
  // bundled target's decode step.
  struct PlainLayer {
    float* k = nullptr;        // row r of kv head h at k + h * head_stride + r * row_stride
    float* v = nullptr;        // likewise
    int64_t head_stride = 0;   // capacity * head_dim
    int64_t row_stride = 0;    // head_dim
    int64_t length = 0;        // valid rows, the appended ones included
    const bool* keep = nullptr;  // keep[h * keep_stride + r]; null while no row was evicted
    int64_t keep_stride = 0;
  };
  // Whether appendPlain applies: float32 storage, contiguous (not paged), no
  // write order switched on by a fault.
  bool plainAppendApplies() const;
  // append() for n rows the caller writes itself: makes room, advances the
  // length, marks the rows kept and numbers them as append does, and returns
  // the layer, whose rows [length - n, length) of every kv head the caller
  // must fill before anything reads them. Throws Error when
  // plainAppendApplies() is false.
  PlainLayer appendPlain(int64_t layer, int64_t n);

  // Rows [first[l], first[l] + n) of every layer l, copied into one float32
  // tensor each for K and V: [layers, kv_heads, n, head_dim]. For a
  // plainAppendApplies() cache only (a plain copy from storage: the ledger's
  // copy of a write cost a small drafter's step a sixth in ATen calls).
  std::pair<at::Tensor, at::Tensor> copyRows(const std::vector<int64_t>& first, int64_t n) const;

  // Views of the valid rows: [kv_heads, length, head_dim], storage dtype
  // (paged: a copy gathered from the blocks, in row order).
  at::Tensor keys(int64_t layer) const;
  at::Tensor values(int64_t layer) const;

  // Keeps the first new_length rows of every layer (0 <= new_length <= length).
  // A compacted layer refuses to cut into its gathered rows.
  // Paged: a crop then frees every block past the rows the longest layer keeps.
  void crop(int64_t new_length);
  void cropLayer(int64_t layer, int64_t new_length);
  // Keeps the rows of positions before end_position in every layer: the
  // rollback after a rejected draft, by position, so it also holds for a
  // compacted cache (whose rows appended after compaction are contiguous).
  void cropToPosition(int64_t end_position);
  // Paged: frees every block.
  void clear();
  // A deep copy (storage, masks, positions and fault switches). A paged
  // cache's copy gets a pool of its own (same shape, same sequence id): a
  // copy made for a what-if or a reference must not take blocks from the
  // pool the live sequences share, nor change which blocks they are handed.
  KvCache clone() const;
  // Drops the first `count` rows of a layer (0 <= count <= length); the rest
  // move to the front in order. A sliding window's cache evicts this way.
  void evictFront(int64_t layer, int64_t count);
  // Drops the rows of positions before `position` (those that left a sliding
  // window); returns how many rows went.
  int64_t evictBefore(int64_t layer, int64_t position);

  // [kv_heads, length] bool, true where attention may read the row; undefined
  // while no row of the layer has been evicted (attention then masks nothing).
  at::Tensor keepMask(int64_t layer) const;
  // Removes the rows of each kv head where keep ([kv_heads, length] bool) is
  // false. Removal is final: a row already removed stays removed. Rows
  // appended later are kept; crop and evictFront carry the mask along.
  void evictRows(int64_t layer, const at::Tensor& keep);
  // Rows of `kv_head` attention still reads (length when nothing was evicted).
  int64_t keptRows(int64_t layer, int64_t kv_head) const;

  // Gathers the rows each kv head still reads (keepMask) to the front of the
  // layer, in position order, and frees the others: the layer becomes
  // [kv_heads, kept, head_dim] with no mask, and attention over it equals
  // attention over the masked layer. Every kv head must keep the same number
  // of rows (a budgeted eviction does); otherwise throws Error naming the
  // counts. No-op while nothing is masked. A compacted layer refuses
  // evictFront (a sliding window's row order no longer holds).
  void compact(int64_t layer);
  // Whether the layer's rows were gathered by compact() (and not renumbered since).
  bool compacted(int64_t layer) const;
  // [kv_heads, length] int64: the position each row holds, per kv head
  // (firstPosition + r for every head of a layer that never compacted).
  at::Tensor rowPositions(int64_t layer) const;
  // After the layer's keys were re-rotated to contiguous positions
  // (core/model/key_rerotation.h): row r of every kv head now holds position
  // first_position + r, and the next row is written for first_position + length.
  void renumberRows(int64_t layer, int64_t first_position);

  // Pad rows at the front of every layer (a left-padded prompt); 0 for a
  // cache that was never padded. setPadRows is called once the rows are
  // written (every layer must hold at least that many); clear() and a crop
  // below them shrink the count.
  int64_t padRows() const { return pad_rows_; }
  void setPadRows(int64_t rows);

  // Fault injection (core/cache/fault_policy.h) acts on cache writes through
  // these switches; a correct engine never sets them.
  // Whether attention hides the pad rows from the real queries (the
  // padding-mask-dropped fault clears it after the prefill).
  void setMasksPadding(bool masks) { masks_padding_ = masks; }
  bool masksPadding() const { return masks_padding_; }
  // Which of an append's n rows are written, in which physical order (indices
  // into the appended rows); nullopt = all, in order. Applies to every append
  // until reset to nullopt.
  void setWriteOrder(std::optional<std::vector<int64_t>> order) { write_order_ = std::move(order); }
  // Whether the rows one forward appends mask each other causally.
  void setCausalAmongNewRows(bool causal) { causal_among_new_ = causal; }
  bool causalAmongNewRows() const { return causal_among_new_; }

 private:
  struct Layer {
    at::Tensor k;  // [kv_heads, capacity, head_dim]
    at::Tensor v;  // [kv_heads, capacity, head_dim]
    at::Tensor keep;  // [kv_heads, capacity] bool once a row was evicted; undefined before
    at::Tensor positions;  // [kv_heads, capacity] int64 once compacted; undefined before
    int64_t length = 0;
    int64_t first_position = 0;
    int64_t compacted_away = 0;  // rows compaction removed from each kv head
    int64_t gathered = 0;        // rows [0, gathered) were gathered by compaction (positions differ per head)
  };
  void ensureCapacity(Layer& layer, int64_t needed);
  // After n rows were written at [length, length + n) of a contiguous layer:
  // their keep flags and positions, and the length.
  void advanceWritten(int64_t layer_index, int64_t n);
  const Layer& layerAt(int64_t layer) const;
  static void growKeepMask(Layer& layer, int64_t capacity);
  // The layer's storage (K, V, positions) re-allocated with `capacity` rows, keeping the valid ones.
  void reallocate(Layer& layer, int64_t capacity);

  // Paged only: throws Error naming `feature` as not supported by the paged layout.
  void refuseIfPaged(const char* feature) const;
  // Paged only: rows of the longest layer (the rows the block table must keep).
  int64_t longestLength() const;

  int64_t kv_heads_;
  int64_t head_dim_;
  c10::TensorOptions storage_;
  std::vector<Layer> layers_;  // paged: lengths and positions only, k and v undefined
  std::optional<std::vector<int64_t>> write_order_;
  bool causal_among_new_ = true;
  int64_t pad_rows_ = 0;
  bool masks_padding_ = true;
  // Shared by plain copies, as the contiguous layout's tensors are; clone() copies it.
  std::shared_ptr<BlockTable> paged_;
};

}  // namespace kvscope
