#pragma once
// Element pruning of K and V (as in Mustafar): zero single entries instead of
// removing whole rows. `per-token` keeps, in each row, the top channels by
// score; `per-channel` keeps, in each channel, the top entries across rows.
// K and V sparsities are independent; the most recent `dense_window` rows
// stay dense. Pure functions on tensors; the cache applies the masks by
// zeroing its storage.
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace kvscope {

enum class PruneAxis { PerToken, PerChannel };
enum class ElementScore { Magnitude, OutputAware };
const char* pruneAxisName(PruneAxis axis);
const char* elementScoreName(ElementScore score);
PruneAxis parsePruneAxis(const std::string& name);        // throws Error naming the valid values
ElementScore parseElementScore(const std::string& name);  // likewise

struct PruneSettings {
  PruneAxis axis = PruneAxis::PerToken;
  ElementScore score = ElementScore::Magnitude;
  double k_sparsity = 0;       // fraction of K entries zeroed, in [0, 1)
  double v_sparsity = 0;       // likewise for V
  int64_t dense_window = 32;   // the most recent rows, never pruned
  int64_t query_window = 16;   // output-aware: the last queries whose |q| and attention weigh the entries

  // Throws Error naming the option and its valid range.
  void validate() const;
};

// How many of `count` entries survive a sparsity: count - round(sparsity * count).
int64_t keptEntries(int64_t count, double sparsity);

// Scores of K entries: |k|, or (output-aware) |k| x mean |q| per channel over
// the queries given, averaged over the query heads sharing the kv head.
// keys [kv_heads, T, D]; queries [heads, n, D] (only for output-aware).
// Returns [kv_heads, T, D] float32.
at::Tensor keyElementScores(const at::Tensor& keys, const at::Tensor& queries, ElementScore score);

// Scores of V entries: |v|, or (output-aware) |v| x the attention weight its
// row received (row_weights [kv_heads, T], e.g. h2oScores of the last
// queries). values [kv_heads, T, D] -> [kv_heads, T, D] float32.
at::Tensor valueElementScores(const at::Tensor& values, const at::Tensor& row_weights, ElementScore score);

// The entries kept ([kv_heads, T, D] bool) for scores [kv_heads, T, D]: the
// rows before the dense window ([0, T - dense_window)) keep, per row
// (per-token) or per channel (per-channel), the keptEntries best scores, the
// earlier index first on equal scores; the dense window keeps everything.
// rows_present ([kv_heads, T] bool; undefined: every row) marks the rows an
// eviction left: the others are neither counted nor ranked (a per-channel
// budget is a share of the rows present) and stay as they are.
at::Tensor elementKeepMask(const at::Tensor& scores, PruneAxis axis, double sparsity, int64_t dense_window,
                           const at::Tensor& rows_present = at::Tensor());

}  // namespace kvscope
