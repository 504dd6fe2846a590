#include "core/cache/eviction_policy_table.h"

#include <iterator>

#include "core/error.h"

namespace kvscope {

namespace {

// name, sinks, window, kernel, seed, attention, per step, what it keeps
constexpr bool kReads = true, kNo = false;
constexpr EvictionPolicyInfo kPolicies[] = {
    {EvictionPolicy::Streaming, "streaming", kReads, PolicyWindow::None, kNo, kNo, false, false,
     "sinks + recent: the first rows (attention sinks) and the most recent rows"},
    {EvictionPolicy::H2O, "h2o", kNo, PolicyWindow::RecentRows, kNo, kNo, true, false,
     "attention received, summed over every query seen; the recent window always kept"},
    {EvictionPolicy::SnapKV, "snapkv", kNo, PolicyWindow::LastQueries, kReads, kNo, true, false,
     "attention of the last queries, max-pooled over positions; that window always kept"},
    {EvictionPolicy::Tova, "tova", kNo, PolicyWindow::None, kNo, kNo, true, true,
     "the current query's attention; evicts the lowest-weighted row at every decode step over budget"},
    {EvictionPolicy::Knorm, "knorm", kNo, PolicyWindow::None, kNo, kNo, false, false,
     "the rows whose key has the lowest L2 norm"},
    {EvictionPolicy::Random, "random", kNo, PolicyWindow::None, kNo, kReads, false, false,
     "seeded uniform scores"},
    {EvictionPolicy::Pyramid, "pyramid", kNo, PolicyWindow::LastQueries, kReads, kNo, true, false,
     "snapkv's scores under per-layer budgets decreasing from the first layer to the last (PyramidKV)"},
};

}  // namespace

bool EvictionPolicyInfo::reads(EvictionOption option) const {
  switch (option) {
    case EvictionOption::Sinks: return reads_sinks;
    case EvictionOption::Kernel: return reads_kernel;
    case EvictionOption::Seed: return reads_seed;
    case EvictionOption::Window: return window != PolicyWindow::None;
  }
  return false;
}

const char* evictionOptionName(EvictionOption option) {
  switch (option) {
    case EvictionOption::Sinks: return "sinks";
    case EvictionOption::Kernel: return "kernel";
    case EvictionOption::Seed: return "seed";
    case EvictionOption::Window: return "window";
  }
  return "?";
}

std::vector<EvictionOption> allEvictionOptions() {
  return {EvictionOption::Sinks, EvictionOption::Kernel, EvictionOption::Seed, EvictionOption::Window};
}

const std::vector<EvictionPolicyInfo>& evictionPolicyTable() {
  static const std::vector<EvictionPolicyInfo> table(std::begin(kPolicies), std::end(kPolicies));
  return table;
}

const EvictionPolicyInfo& evictionPolicyInfo(EvictionPolicy policy) {
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) {
    if (info.policy == policy) return info;
  }
  throw Error("eviction: unknown policy");
}

const char* evictionPolicyName(EvictionPolicy policy) {
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) {
    if (info.policy == policy) return info.name;
  }
  return "?";
}

EvictionPolicy parseEvictionPolicy(const std::string& name) {
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) {
    if (name == info.name) return info.policy;
  }
  throw Error("--policy must be one of " + evictionPolicyNames(", ") + ", got '" + name + "'");
}

std::vector<EvictionPolicy> allEvictionPolicies() {
  std::vector<EvictionPolicy> all;
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) all.push_back(info.policy);
  return all;
}

std::string evictionPolicyNames(const std::string& separator) {
  std::string names;
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) names += (names.empty() ? "" : separator) + info.name;
  return names;
}

std::string policiesReading(EvictionOption option) {
  std::vector<std::string> names;
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) {
    if (info.reads(option)) names.push_back(info.name);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " and " : ", ";
    list += names[i];
  }
  return list;
}

bool needsAttention(EvictionPolicy policy) { return evictionPolicyInfo(policy).needs_attention; }

bool evictsPerStep(EvictionPolicy policy) { return evictionPolicyInfo(policy).evicts_per_step; }

}  // namespace kvscope
