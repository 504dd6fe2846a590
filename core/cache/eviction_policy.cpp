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

constexpr int64_t kSnapkvDefaultWindow = 16;

struct PolicyName {
  EvictionPolicy policy;
  const char* name;
};
constexpr PolicyName kPolicyNames[] = {
    {EvictionPolicy::Streaming, "streaming"}, {EvictionPolicy::H2O, "h2o"},     {EvictionPolicy::SnapKV, "snapkv"},
    {EvictionPolicy::Tova, "tova"},           {EvictionPolicy::Knorm, "knorm"}, {EvictionPolicy::Random, "random"},
    {EvictionPolicy::Pyramid, "pyramid"},
};

std::string policyList() {
  std::string list;
  for (const PolicyName& p : kPolicyNames) list += (list.empty() ? "" : ", ") + std::string(p.name);
  return list;
}

}  // namespace

const char* evictionPolicyName(EvictionPolicy policy) {
  for (const PolicyName& p : kPolicyNames) {
    if (p.policy == policy) return p.name;
  }
  return "?";
}

EvictionPolicy parseEvictionPolicy(const std::string& name) {
  for (const PolicyName& p : kPolicyNames) {
    if (name == p.name) return p.policy;
  }
  throw Error("--policy must be one of " + policyList() + ", got '" + name + "'");
}

std::vector<EvictionPolicy> allEvictionPolicies() {
  std::vector<EvictionPolicy> all;
  for (const PolicyName& p : kPolicyNames) all.push_back(p.policy);
  return all;
}

bool needsAttention(EvictionPolicy policy) {
  return policy == EvictionPolicy::H2O || policy == EvictionPolicy::SnapKV || policy == EvictionPolicy::Tova ||
         policy == EvictionPolicy::Pyramid;
}

int64_t EvictionBudget::rowsOf(int64_t length) const {
  if (length <= 0) return 0;
  if (rows > 0) return std::min(rows, length);
  return std::clamp<int64_t>(std::llround(fraction * static_cast<double>(length)), 1, length);
}

void EvictionSettings::validate() const {
  if (budget.rows < 0) throw Error("--budget-rows must be >= 1, got " + std::to_string(budget.rows));
  if (budget.rows == 0 && !(budget.fraction > 0 && budget.fraction <= 1)) {
    throw Error("--budget must be a fraction of the rows in (0, 1], got " + formatNumber(budget.fraction));
  }
  if (sinks < 0) throw Error("--sinks must be >= 0, got " + std::to_string(sinks));
  if (window < -1 || window == 0) throw Error("--window must be >= 1, got " + std::to_string(window));
  if (kernel < 1 || kernel % 2 == 0) throw Error("--kernel must be odd and >= 1, got " + std::to_string(kernel));
  if (demote_bits != 0 && demote_bits != 4 && demote_bits != 8) {
    throw Error("--demote must be 8 or 4 (bits of the demoted copies), got " + std::to_string(demote_bits));
  }
  // TOVA's decode steps evict against the budget, and demoted rows would count
  // as kept: the cache would stay over budget and lose a demoted row per step.
  if (demote_bits != 0 && policy == EvictionPolicy::Tova) {
    throw Error("--demote does not combine with --policy tova (its decode steps evict rows)");
  }
}

int64_t EvictionSettings::recentWindow(int64_t keep, int64_t queries) const {
  switch (policy) {
    case EvictionPolicy::H2O:
      return window > 0 ? std::min(window, keep) : keep / 2;
    case EvictionPolicy::SnapKV:
    case EvictionPolicy::Pyramid:
      return std::min(window > 0 ? window : kSnapkvDefaultWindow, queries);
    default:
      return 0;
  }
}

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
  const bool snapkv = settings.policy == EvictionPolicy::SnapKV || settings.policy == EvictionPolicy::Pyramid;
  if (snapkv && settings.window > queries) {
    throw Error("--window must be in [1, " + std::to_string(queries) + "] (the queries of the prefill) for " + name +
                ", got " + std::to_string(settings.window));
  }
}

// The policy's score of every row: [kv_heads, T] float32, higher = more worth
// keeping. `window`: snapkv's observation window.
at::Tensor policyScores(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t window) {
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

}  // namespace

LayerEviction chooseRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t keep_rows) {
  checkEvidence(settings, evidence);
  const int64_t queries = evidence.attention.defined() ? evidence.attention.size(1) : 0;
  const int64_t recent = settings.recentWindow(keep_rows, queries);  // [T - recent, T) kept whatever their score
  RowSelection selection{keep_rows, 0, recent};
  if (settings.policy == EvictionPolicy::Streaming) {
    selection.first = settings.sinks;
    selection.recent = keep_rows;  // what the sinks leave goes to the most recent rows
  }
  LayerEviction decision;
  decision.scores = policyScores(settings, evidence, std::max<int64_t>(recent, 1));  // [kv, T]
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
