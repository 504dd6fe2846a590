#include "core/cache/element_pruning.h"

#include <algorithm>
#include <cmath>

#include <torch/types.h>

#include "core/cache/eviction_scores.h"
#include "core/error.h"

namespace kvscope {

const char* pruneAxisName(PruneAxis axis) { return axis == PruneAxis::PerToken ? "per-token" : "per-channel"; }

const char* elementScoreName(ElementScore score) {
  return score == ElementScore::Magnitude ? "magnitude" : "output-aware";
}

PruneAxis parsePruneAxis(const std::string& name) {
  if (name == "per-token") return PruneAxis::PerToken;
  if (name == "per-channel") return PruneAxis::PerChannel;
  throw Error("--element must be per-token or per-channel, got '" + name + "'");
}

ElementScore parseElementScore(const std::string& name) {
  if (name == "magnitude") return ElementScore::Magnitude;
  if (name == "output-aware") return ElementScore::OutputAware;
  throw Error("--score must be magnitude or output-aware, got '" + name + "'");
}

void PruneSettings::validate() const {
  auto sparsity = [](double s, const char* option) {
    if (!(s >= 0 && s < 1)) throw Error(std::string(option) + " must be in [0, 1), got " + formatNumber(s));
  };
  sparsity(k_sparsity, "--k-sparsity");
  sparsity(v_sparsity, "--v-sparsity");
  if (dense_window < 0) throw Error("--dense-window must be >= 0, got " + std::to_string(dense_window));
  if (query_window < 1) throw Error("--window must be >= 1, got " + std::to_string(query_window));
}

int64_t keptEntries(int64_t count, double sparsity) {
  return count - std::clamp<int64_t>(std::llround(sparsity * static_cast<double>(count)), 0, count);
}

at::Tensor keyElementScores(const at::Tensor& keys, const at::Tensor& queries, ElementScore score) {
  auto magnitude = keys.to(torch::kFloat32).abs();  // [kv, T, D]
  if (score == ElementScore::Magnitude) return magnitude;
  require(queries.defined() && queries.dim() == 3 && queries.size(2) == keys.size(2),
          "output-aware K scores: need the queries [heads, n, head_dim]");
  // mean |q| per channel: over the queries, then over the kv head's query heads.
  auto per_head = queries.to(torch::kFloat32).abs().mean(1);  // [heads, D]
  const int64_t kv_heads = keys.size(0);
  auto per_kv_head = groupMeanWeights(per_head.unsqueeze(1), kv_heads).squeeze(1);  // [kv, D]
  return magnitude * per_kv_head.unsqueeze(1);                                       // [kv, T, D]
}

at::Tensor valueElementScores(const at::Tensor& values, const at::Tensor& row_weights, ElementScore score) {
  auto magnitude = values.to(torch::kFloat32).abs();  // [kv, T, D]
  if (score == ElementScore::Magnitude) return magnitude;
  require(row_weights.defined() && row_weights.dim() == 2 && row_weights.size(0) == values.size(0) &&
              row_weights.size(1) == values.size(1),
          "output-aware V scores: need the weight each row received [kv_heads, T]");
  return magnitude * row_weights.to(torch::kFloat32).unsqueeze(2);  // [kv, T, D]
}

namespace {

// Keeps, in every slice along the last axis of scores [..., m], the
// counts[...] best entries (counts [...] int64, the shape of scores without
// its last axis); a stable descending sort puts the earlier index first
// among equal scores.
at::Tensor keepTopAlongLast(const at::Tensor& scores, const at::Tensor& counts) {
  const auto order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true));  // [..., m]
  const auto rank = torch::arange(scores.size(-1), torch::kLong);                                  // [m]
  const auto chosen = (rank < counts.unsqueeze(-1)).expand(order.sizes()).contiguous();             // [..., m] by rank
  return torch::zeros(scores.sizes(), torch::kBool).scatter(-1, order, chosen);                     // [..., m] by index
}

// keptEntries of every count in `present` ([...] int64) -> [...] int64.
at::Tensor keptEntriesOf(const at::Tensor& present, double sparsity) {
  auto kept = present.contiguous().clone();  // [...] int64
  auto* counts = kept.data_ptr<int64_t>();
  for (int64_t i = 0; i < kept.numel(); ++i) counts[i] = keptEntries(counts[i], sparsity);
  return kept;
}

}  // namespace

at::Tensor elementKeepMask(const at::Tensor& scores, PruneAxis axis, double sparsity, int64_t dense_window,
                           const at::Tensor& rows_present) {
  require(scores.dim() == 3, "elementKeepMask: expected scores [kv_heads, T, D]");
  const int64_t kv_heads = scores.size(0), rows = scores.size(1), channels = scores.size(2);
  require(!rows_present.defined() || rows_present.sizes() == scores.sizes().slice(0, 2),
          "elementKeepMask: rows_present must be [kv_heads, T]");
  auto keep = torch::ones(scores.sizes(), torch::kBool);  // [kv, T, D]
  const int64_t pruned_rows = std::max<int64_t>(rows - std::max<int64_t>(dense_window, 0), 0);
  if (pruned_rows == 0 || sparsity <= 0) return keep;
  const auto present = rows_present.defined() ? rows_present.narrow(1, 0, pruned_rows).to(torch::kBool)
                                              : torch::ones({kv_heads, pruned_rows}, torch::kBool);  // [kv, R]
  // Rows no longer present rank below every score (scores are >= 0).
  const auto old_rows = scores.narrow(1, 0, pruned_rows).to(torch::kFloat32)
                            .masked_fill(present.logical_not().unsqueeze(2), -1.0);  // [kv, R, D]
  at::Tensor kept;
  if (axis == PruneAxis::PerToken) {
    const auto counts = torch::full({kv_heads, pruned_rows}, keptEntries(channels, sparsity), torch::kLong);  // [kv, R]
    kept = keepTopAlongLast(old_rows, counts);  // per row, over channels
  } else {
    const auto present_rows = present.sum(1, /*keepdim=*/true).expand({kv_heads, channels});  // [kv, D]
    const auto counts = keptEntriesOf(present_rows, sparsity);                               // [kv, D]
    kept = keepTopAlongLast(old_rows.transpose(1, 2), counts).transpose(1, 2);  // per channel, over rows
  }
  keep.narrow(1, 0, pruned_rows).copy_(kept | present.logical_not().unsqueeze(2));  // absent rows stay as they are
  return keep;
}

}  // namespace kvscope
