#include "core/cache/eviction_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/types.h>

#include "core/cache/eviction_scores.h"
#include "core/cache/row_selection.h"
#include "core/error.h"

namespace kvscope {

namespace {

// Refuses evidence the policy cannot score with, and a snapkv window longer
// than the queries seen (its default, 16, shrinks to a short prompt; a window
// the user chose does not).
void checkEvidence(const EvictionSettings& settings, const LayerEvidence& evidence) {
  const int64_t rows = evidence.keys.size(1);
  const char* name = evictionPolicyName(settings.policy);
  if (!needsAttention(settings.policy)) return;
  require(evidence.attention.defined() && evidence.attention.size(2) == rows,
          std::string(name) + ": needs the attention weights over the layer's " + std::to_string(rows) + " rows");
  const int64_t queries = evidence.attention.size(1);
  const bool window_of_queries = evictionPolicyInfo(settings.policy).window == PolicyWindow::LastQueries;
  if (window_of_queries && settings.window > queries) {
    throw Error("--window must be in [1, " + std::to_string(queries) + "] (the queries of the prefill) for " + name +
                ", got " + std::to_string(settings.window));
  }
}

}  // namespace

at::Tensor scoreRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t window) {
  const int64_t kv_heads = evidence.keys.size(0), rows = evidence.keys.size(1);
  switch (settings.policy) {
    case EvictionPolicy::Streaming:
      return recencyScores(kv_heads, rows);
    case EvictionPolicy::H2O:
      return h2oScores(evidence.attention, kv_heads);
    case EvictionPolicy::SnapKV:
    case EvictionPolicy::Pyramid:
      return snapkvScores(evidence.attention, kv_heads, window, settings.kernel);
    case EvictionPolicy::Tova:
      return tovaScores(evidence.attention, kv_heads);
    case EvictionPolicy::Knorm:
      return knormScores(evidence.keys);
    case EvictionPolicy::Random:
      return randomScores(kv_heads, rows, settings.seed, evidence.layer);
  }
  throw Error("eviction: unknown policy");
}

LayerEviction chooseRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t keep_rows) {
  checkEvidence(settings, evidence);
  const int64_t queries = evidence.attention.defined() ? evidence.attention.size(1) : 0;
  const int64_t recent = settings.recentWindow(keep_rows, queries);  // [T - recent, T) kept whatever their score
  RowSelection selection{keep_rows, 0, recent};
  if (evictionPolicyInfo(settings.policy).reads_sinks) {  // streaming: sinks, then the most recent rows
    selection.first = settings.sinks;
    selection.recent = keep_rows;  // what the sinks leave goes to the most recent rows
  }
  LayerEviction decision;
  decision.scores = scoreRows(settings, evidence, std::max<int64_t>(recent, 1));  // [kv, T]
  // Removal is final: rank the rows already masked last, so the budget goes to rows still read.
  const auto ranking = evidence.held.defined()
                           ? decision.scores.masked_fill(evidence.held.logical_not(), -std::numeric_limits<float>::infinity())
                           : decision.scores;                                       // [kv, T]
  decision.keep = keepBest(ranking, selection);                                     // [kv, T]
  return decision;
}

std::vector<int64_t> layerBudgets(const EvictionSettings& settings, int64_t layers, int64_t rows) {
  const int64_t mean = settings.budget.rowsOf(rows);
  if (settings.policy == EvictionPolicy::Pyramid) return pyramidBudgets(mean, layers, rows);
  return std::vector<int64_t>(static_cast<size_t>(layers), mean);
}

}  // namespace kvscope
