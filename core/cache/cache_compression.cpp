#include "core/cache/cache_compression.h"

#include <algorithm>
#include <string>

#include <torch/types.h>

#include "core/cache/eviction_scores.h"
#include "core/cache/row_demotion.h"
#include "core/cache/row_selection.h"
#include "core/error.h"

namespace kvscope {

namespace {

at::Tensor layerAttention(const std::vector<at::Tensor>& attention, int64_t layer) {
  return layer < static_cast<int64_t>(attention.size()) ? attention[layer] : at::Tensor();
}

// The rows `removed` ([kv, T] bool) marks, as records with their scores and
// the positions the rows hold (positions: [kv, T], KvCache::rowPositions).
void recordRemoved(std::vector<RemovedRow>& out, int64_t layer, const at::Tensor& positions, const at::Tensor& removed,
                   const at::Tensor& scores, int64_t step) {
  const auto dropped = removed.nonzero();  // [count, 2]: (kv head, row), in order
  const auto score_values = scores.to(torch::kFloat64).contiguous();  // [kv, T]
  const auto position_values = positions.contiguous();                // [kv, T]
  const auto at = dropped.accessor<int64_t, 2>();
  const auto score_of = score_values.accessor<double, 2>();
  const auto position_of = position_values.accessor<int64_t, 2>();
  for (int64_t i = 0; i < dropped.size(0); ++i) {
    const int64_t head = at[i][0], row = at[i][1];
    out.push_back({layer, head, position_of[head][row], score_of[head][row], step});
  }
}

// Overwrites the K and V rows `keep` ([kv, T] bool) drops with their
// quantised copies; returns the largest error that made.
double demote(KvCache& cache, int64_t layer, const at::Tensor& keep, int64_t bits) {
  const auto dropped = keep.logical_not().unsqueeze(2);  // [kv, T, 1]
  double max_error = 0;
  for (const at::Tensor& stored : {cache.keys(layer), cache.values(layer)}) {  // views of the storage
    const auto copy = quantizeRows(stored, bits).to(stored.scalar_type());      // [kv, T, D]
    const auto error = (copy.to(torch::kFloat32) - stored.to(torch::kFloat32)).abs()  // [kv, T, D]
                           .masked_fill(dropped.logical_not(), 0);
    max_error = std::max(max_error, error.max().item<double>());
    stored.copy_(torch::where(dropped, copy, stored));
  }
  return max_error;
}

}  // namespace

EvictionDecision decideEviction(const KvCache& cache, const EvictionSettings& settings,
                                const std::vector<at::Tensor>& attention, const std::vector<int64_t>& budgets) {
  settings.validate();
  require(static_cast<int64_t>(budgets.size()) == cache.numLayers(), "eviction: one budget per layer");
  EvictionDecision decision;
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    require(cache.firstPosition(l) == 0, "eviction: layer " + std::to_string(l) +
                                             " is a sliding window's (its rows do not start at position 0); "
                                             "eviction on sliding-window layers is not supported yet");
    const at::Tensor held = cache.keepMask(l);  // [kv, T] bool, or undefined: every row read
    const LayerEvidence evidence{l, cache.keys(l), layerAttention(attention, l), held};
    const LayerEviction layer = chooseRows(settings, evidence, budgets[l]);
    decision.keep.push_back(layer.keep);      // [kv, T]
    decision.scores.push_back(layer.scores);  // [kv, T]
  }
  return decision;
}

EvictionDecision decideDecodeStep(const KvCache& cache, const EvictionSettings& settings,
                                  const std::vector<at::Tensor>& attention, int64_t step) {
  require(evictsPerStep(settings.policy),
          std::string("eviction: ") + evictionPolicyName(settings.policy) + " does not evict at decode steps");
  EvictionDecision decision;
  decision.step = step;
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    const int64_t rows = cache.length(l), kv_heads = cache.kvHeads();
    auto held = cache.keepMask(l);  // [kv, T]
    if (!held.defined()) held = torch::ones({kv_heads, rows}, torch::kBool);
    const LayerEvidence evidence{l, cache.keys(l), layerAttention(attention, l), held};
    const auto scores = scoreRows(settings, evidence, /*window=*/1);  // [kv, T]
    const std::vector<int64_t> lowest = lowestKept(scores, held);
    auto keep = torch::ones({kv_heads, rows}, torch::kBool);  // [kv, T]
    for (int64_t h = 0; h < kv_heads; ++h) {
      if (cache.keptRows(l, h) > settings.budget.rowsOf(rows) && lowest[h] >= 0) keep[h][lowest[h]] = false;
    }
    decision.keep.push_back(keep);
    decision.scores.push_back(scores);
  }
  return decision;
}

PolicyEviction applyEviction(KvCache& cache, const EvictionDecision& decision, int64_t demote_bits) {
  require(static_cast<int64_t>(decision.keep.size()) == cache.numLayers() && decision.scores.size() == decision.keep.size(),
          "eviction: a decision gives every layer's keep mask and scores");
  PolicyEviction done;
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    const at::Tensor& keep = decision.keep[l];  // [kv, T]
    const at::Tensor held = cache.keepMask(l);  // [kv, T] bool, or undefined: every row read
    done.scores.push_back(decision.scores[l]);
    done.demoted.push_back(torch::zeros_like(keep));
    // Only rows still read can be removed (a re-compression finds some masked already).
    const auto removed = held.defined() ? held.logical_and(keep.logical_not()) : keep.logical_not();  // [kv, T]
    if (!removed.any().item<bool>()) continue;  // nothing to remove: attention keeps its unmasked path
    if (demote_bits > 0) {
      done.demoted.back() = removed;
      done.demote_max_error = std::max(done.demote_max_error, demote(cache, l, keep, demote_bits));
    } else {
      cache.evictRows(l, keep);
    }
    recordRemoved(done.removed, l, cache.rowPositions(l), removed, decision.scores[l], decision.step);
  }
  return done;
}

namespace {

// The last `window` queries' weights, summed per row and averaged over each
// kv head's query heads: attention [heads, n, T] -> [kv, T].
at::Tensor recentAttentionReceived(const at::Tensor& attention, int64_t kv_heads, int64_t window) {
  const int64_t n = attention.size(1);
  return h2oScores(attention.narrow(1, n - std::min(window, n), std::min(window, n)), kv_heads);
}

// Zeroes the entries `keep` drops; returns how many.
int64_t zeroDropped(const at::Tensor& stored, const at::Tensor& keep) {
  stored.masked_fill_(keep.logical_not(), 0);
  return keep.numel() - keep.sum().item<int64_t>();
}

}  // namespace

PrunedElements pruneElements(KvCache& cache, const PruneSettings& settings, const std::vector<at::Tensor>& queries,
                             const std::vector<at::Tensor>& attention) {
  settings.validate();
  const bool output_aware = settings.score == ElementScore::OutputAware;
  PrunedElements pruned;
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    at::Tensor recent_queries, row_weights;
    if (output_aware) {
      const auto& q = queries.at(l);  // [heads, n, D]
      const int64_t window = std::min(settings.query_window, q.size(1));
      recent_queries = q.narrow(1, q.size(1) - window, window);
      row_weights = recentAttentionReceived(attention.at(l), cache.kvHeads(), settings.query_window);
    }
    // keys() and values() are views of the storage: zeroing them prunes the cache.
    const auto keys = cache.keys(l), values = cache.values(l);  // [kv, T, D]
    // Rows an eviction already hid are neither pruned nor counted.
    const auto rows_present = cache.keepMask(l);  // [kv, T] bool, or undefined: every row
    const auto k_keep = elementKeepMask(keyElementScores(keys, recent_queries, settings.score), settings.axis,
                                        settings.k_sparsity, settings.dense_window, rows_present);  // [kv, T, D]
    const auto v_keep = elementKeepMask(valueElementScores(values, row_weights, settings.score), settings.axis,
                                        settings.v_sparsity, settings.dense_window, rows_present);  // [kv, T, D]
    pruned.k += zeroDropped(keys, k_keep);
    pruned.v += zeroDropped(values, v_keep);
    pruned.k_keep.push_back(k_keep);
    pruned.v_keep.push_back(v_keep);
  }
  return pruned;
}

CompressionOutcome compressCache(KvCache& cache, const CompressionRequest& request) {
  CompressionOutcome done;
  if (request.eviction) {
    done.layer_budgets = layerBudgets(*request.eviction, cache.numLayers(), cache.length(0));
    const EvictionDecision decision = decideEviction(cache, *request.eviction, request.attention, done.layer_budgets);
    PolicyEviction eviction = applyEviction(cache, decision, request.eviction->demote_bits);
    done.removed = std::move(eviction.removed);
    done.scores = std::move(eviction.scores);
    done.demoted = std::move(eviction.demoted);
    done.demote_max_error = eviction.demote_max_error;
  }
  if (request.pruning) done.pruned = pruneElements(cache, *request.pruning, request.queries, request.attention);
  return done;
}

}  // namespace kvscope
