#pragma once
// What kvscope-cli compress prints: one compression lab run (text and JSON)
// and the sweep table of every policy and pruning setting.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/compress/compression_lab.h"
#include "core/compress/self_speculation.h"

namespace kvscope::cli {

// The spec in words: "h2o budget 50%", "knorm budget 10 rows, the rest as
// int8", "per-token magnitude K 50% V 50% (dense window 32)".
std::string describeSpec(const CompressionSpec& spec);

nlohmann::json compressionJson(const CompressionSpec& spec, const CompressionResult& result);
void printCompression(std::ostream& out, const CompressionSpec& spec, const CompressionResult& result);

// One row of the sweep table.
struct SweepRow {
  CompressionSpec spec;
  CompressionResult result;
};

nlohmann::json sweepJson(const std::vector<SweepRow>& eviction, const std::vector<SweepRow>& pruning);
void printSweep(std::ostream& out, const std::vector<SweepRow>& eviction, const std::vector<SweepRow>& pruning);

// One run of greedy speculation with a compressed drafting cache, timed.
struct SpeculationRow {
  std::string label;  // "h2o budget 25%", "bundled drafter", ...
  SelfSpeculationResult result;
  double seconds = 0;           // wall time of the run
  double baseline_seconds = 0;  // plain greedy decoding of the target, same tokens
};

nlohmann::json speculationJson(const SpeculationRow& row);
// The table of alpha, tokens per verify forward and measured speedup.
void printSpeculation(std::ostream& out, int64_t gamma, const std::vector<SpeculationRow>& rows);

}  // namespace kvscope::cli
