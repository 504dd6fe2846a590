#pragma once
// A plain, torch-free copy of one compression lab run (compression_lab.h)
// for viewers that must not hold tensors: the GUI's Compression panel gets it
// from the engine thread. Per layer and kv head it says what became of every
// compressed prefill row (kept, evicted by the prefill compression, evicted
// by a decode step, demoted), the policy's score of each row, the K and V the
// compressed cache held and which of their entries element pruning zeroed.
#include <cstdint>
#include <string>
#include <vector>

#include "core/compress/compression_lab.h"

namespace kvscope {

enum class RowFate : uint8_t {
  Kept,
  Evicted,          // by the prefill compression
  EvictedDecoding,  // by a decode step (tova), after the prefill compression kept it
  Demoted,          // kept as a low-precision copy (--demote)
};
const char* rowFateName(RowFate fate);

struct CompressionSummary {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t heads = 0;  // query heads (the output error's columns)
  int64_t head_dim = 0;
  int64_t rows = 0;  // prefill rows compressed: positions 0..rows-1

  std::vector<int64_t> layer_budgets;  // rows kept per kv head, per layer (eviction; empty otherwise)
  std::vector<CompressionStep> steps;
  double kl_mean = 0, kl_max = 0, top1_agreement = 1, attention_mass = 1;
  double perplexity_full = 0, perplexity_compressed = 0;
  int64_t bytes_full = 0, bytes_kept = 0;
  int64_t rows_evicted = 0;           // (layer, kv head, row) triples not kept after the prefill compression
  int64_t rows_evicted_decoding = 0;  // removed by decode steps (tova), any position
  int64_t pruned_k = 0, pruned_v = 0;  // entries zeroed by element pruning

  // Flattened [layer][kv head][row]; scores empty without eviction.
  std::vector<RowFate> fates;
  std::vector<float> scores;
  // Flattened [layer][kv head][row][channel]; empty unless the run recorded
  // its cache (CompressionInput::record_cache). Zeroed masks empty without pruning.
  std::vector<float> keys, values;
  std::vector<uint8_t> k_zeroed, v_zeroed;
  std::vector<float> output_error;  // flattened [layer][head]: mean |o_comp - o_full| / |o_full|

  bool hasScores() const { return !scores.empty(); }
  bool hasCache() const { return !keys.empty(); }
  bool hasPruning() const { return !k_zeroed.empty(); }
  // Whether (layer, kv head) is inside the summary.
  bool contains(int64_t layer, int64_t kv_head) const;

  RowFate fate(int64_t layer, int64_t kv_head, int64_t row) const;
  float score(int64_t layer, int64_t kv_head, int64_t row) const;
  // K (values = false) or V of one entry, and whether element pruning zeroed it.
  float entry(bool values, int64_t layer, int64_t kv_head, int64_t row, int64_t channel) const;
  bool zeroed(bool values, int64_t layer, int64_t kv_head, int64_t row, int64_t channel) const;
  float outputError(int64_t layer, int64_t head) const;

  // The positions of (layer, kv head) attention no longer reads: every fate
  // but Kept and Demoted, in position order.
  std::vector<int64_t> removedPositions(int64_t layer, int64_t kv_head) const;
  // Entries of K (or V) element pruning zeroed in (layer, kv head).
  int64_t zeroedEntries(bool values, int64_t layer, int64_t kv_head) const;
};

// Copies `result` (of runCompressionLab on `config`'s model) into plain
// vectors. Throws Error when the result does not match the config's shape.
CompressionSummary summarizeCompression(const CompressionResult& result, const ModelConfig& config);

}  // namespace kvscope
