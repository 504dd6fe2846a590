#include "core/cache/eviction_settings.h"

#include <algorithm>
#include <cmath>

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

}  // namespace kvscope
