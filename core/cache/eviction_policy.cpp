#include "core/cache/eviction_policy.h"

#include <algorithm>
#include <cstdio>
#include <cmath>

#include <torch/torch.h>

#include "core/cache/eviction_scores.h"
#include "core/cache/row_selection.h"
#include "core/error.h"

namespace kvscope {

namespace {

constexpr int64_t kSnapkvDefaultWindow = 16;

// 1.5 -> "1.5" (std::to_string would print "1.500000").
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

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

LayerEviction chooseRows(const EvictionSettings& settings, const LayerEvidence& evidence, int64_t keep_rows) {
  const int64_t kv_heads = evidence.keys.size(0), rows = evidence.keys.size(1);
  if (needsAttention(settings.policy)) {
    require(evidence.attention.defined() && evidence.attention.size(2) == rows,
            std::string(evictionPolicyName(settings.policy)) + ": needs the attention weights over the layer's " +
                std::to_string(rows) + " rows");
  }
  const int64_t queries = evidence.attention.defined() ? evidence.attention.size(1) : 0;
  const int64_t recent = settings.recentWindow(keep_rows, queries);
  LayerEviction decision;
  RowSelection selection{keep_rows, 0, recent};
  switch (settings.policy) {
    case EvictionPolicy::Streaming:
      decision.scores = recencyScores(kv_heads, rows);
      selection.first = settings.sinks;
      selection.recent = keep_rows;  // what the sinks leave goes to the most recent rows
      break;
    case EvictionPolicy::H2O:
      decision.scores = h2oScores(evidence.attention, kv_heads);
      break;
    case EvictionPolicy::SnapKV:
    case EvictionPolicy::Pyramid:
      decision.scores = snapkvScores(evidence.attention, kv_heads, std::max<int64_t>(recent, 1), settings.kernel);
      break;
    case EvictionPolicy::Tova:
      decision.scores = tovaScores(evidence.attention, kv_heads);
      break;
    case EvictionPolicy::Knorm:
      decision.scores = knormScores(evidence.keys);
      break;
    case EvictionPolicy::Random:
      decision.scores = randomScores(kv_heads, rows, settings.seed, evidence.layer);
      break;
  }
  decision.keep = keepBest(decision.scores, selection);
  return decision;
}

std::vector<int64_t> layerBudgets(const EvictionSettings& settings, int64_t layers, int64_t rows) {
  const int64_t mean = settings.budget.rowsOf(rows);
  if (settings.policy == EvictionPolicy::Pyramid) return pyramidBudgets(mean, layers, rows);
  return std::vector<int64_t>(static_cast<size_t>(layers), mean);
}

}  // namespace kvscope
