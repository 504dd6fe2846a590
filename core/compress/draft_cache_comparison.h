#pragma once
// The two caches of compressed-cache self-speculation side by side, copied
// out of their tensors (torch-free, for the GUI): the full cache the target
// verifies with and the compressed copy it drafts with, both laid out by
// sequence position so row p of one is row p of the other, whatever the
// drafting copy did to its storage (a compacted copy keeps only its kept rows
// at the front; rowPositions says which position each holds).
//
// What a user reads off it: which prompt positions the policy removed from
// the drafting copy (per layer and kv head), and that the rows the copy wrote
// itself while drafting differ from the full cache's past layer 0, because
// their hidden states attended to the compressed context.
#include <cstdint>
#include <vector>

namespace kvscope {

class KvCache;

struct DraftCacheComparison {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t positions = 0;       // sequence positions both caches cover: 0..positions-1
  int64_t compressed_rows = 0;  // the prefill the policy compressed: positions 0..compressed_rows-1

  // Flattened [layer][kv head][position][channel]. The drafting copy's
  // entries are 0 where it holds no row for the position.
  std::vector<float> full_keys, full_values, draft_keys, draft_values;
  // Flattened [layer][kv head][position]: 1 where the drafting copy holds (and reads) the position.
  std::vector<uint8_t> draft_holds;

  bool contains(int64_t layer, int64_t kv_head) const;
  bool holds(int64_t layer, int64_t kv_head, int64_t position) const;
  // K (values = false) or V of one entry of the full cache (draft = false) or the drafting copy.
  float entry(bool draft, bool values, int64_t layer, int64_t kv_head, int64_t position, int64_t channel) const;
  // Rows the drafting copy holds in (layer, kv head).
  int64_t heldRows(int64_t layer, int64_t kv_head) const;
  // max over channels |draft - full| of one row, relative to the full row's
  // largest |entry|; 0 where the copy holds no row.
  double rowDifference(bool values, int64_t layer, int64_t kv_head, int64_t position) const;
};

// Copies both caches (every layer must cover the same positions 0..n-1 in
// `full`). `draft_shift`: how far the drafting copy's positions sit before
// the sequence's (a re-rotated copy; 0 otherwise). Throws Error when the two
// caches' shapes differ.
DraftCacheComparison compareDraftCache(const KvCache& full, const KvCache& draft, int64_t draft_shift,
                                       int64_t compressed_rows);

}  // namespace kvscope
