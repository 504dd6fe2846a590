#pragma once
// The token-eviction policies, one row each: the name, the options it reads,
// whether it scores with attention weights, whether it also evicts during
// decoding, and one line saying what it keeps. The CLI (its option checks and
// usage), the GUI's compression form, the Session and the compression lab all
// read this table, so a new policy is one row here plus its scorer
// (core/cache/eviction_policy.cpp). Torch-free: option parsers and forms
// read it without libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

enum class EvictionPolicy { Streaming, H2O, SnapKV, Tova, Knorm, Random, Pyramid };

// The options of EvictionSettings a policy may read besides its budget (every
// policy reads that), in the order the CLI checks them.
enum class EvictionOption { Sinks, Kernel, Seed, Window };
const char* evictionOptionName(EvictionOption option);  // "sinks": the CLI's --sinks
std::vector<EvictionOption> allEvictionOptions();

// What a policy's --window counts.
enum class PolicyWindow {
  None,         // the policy has no window
  RecentRows,   // the most recent rows, always kept (h2o)
  LastQueries,  // the last queries, whose attention scores the rows (snapkv's observation window)
};

struct EvictionPolicyInfo {
  EvictionPolicy policy;
  const char* name;
  bool reads_sinks;
  PolicyWindow window;
  bool reads_kernel;
  bool reads_seed;
  bool needs_attention;  // its scores come from attention weights (recorded during the prefill)
  bool evicts_per_step;  // every decode step over budget evicts too (after the prefill's compression)
  const char* description;

  bool reads(EvictionOption option) const;
};

// Every policy, in the order menus and sweeps list them.
const std::vector<EvictionPolicyInfo>& evictionPolicyTable();
const EvictionPolicyInfo& evictionPolicyInfo(EvictionPolicy policy);

const char* evictionPolicyName(EvictionPolicy policy);
// Throws Error listing the valid names.
EvictionPolicy parseEvictionPolicy(const std::string& name);
std::vector<EvictionPolicy> allEvictionPolicies();
// The policies' names joined by `separator` ("streaming|h2o|...").
std::string evictionPolicyNames(const std::string& separator);
// The policies that read `option`, as an English list: "h2o, snapkv and pyramid".
std::string policiesReading(EvictionOption option);
// Whether the policy's scores come from attention weights (so the caller
// must record them during the prefill).
bool needsAttention(EvictionPolicy policy);
// Whether the policy also evicts at every decode step (tova).
bool evictsPerStep(EvictionPolicy policy);

}  // namespace kvscope
