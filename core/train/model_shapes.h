#pragma once
// Model shapes to build random-weight models from: real architectures at
// real size (Qwen2.5-0.5B) and the bundled pair's, for benchmarks and memory
// tests that need a model of a given size but not its trained weights.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/safetensors.h"

namespace kvscope {

// The named shapes (`qwen2.5-0.5b`, `bundled-target`, `bundled-drafter`).
std::vector<std::string> modelShapeNames();

// The config.json of a shape: a name from modelShapeNames(), a config.json
// file, or a model directory holding one. Throws Error naming the shape.
nlohmann::json modelShapeConfig(const std::string& shape);

// Writes config.json, generation_config.json and model.safetensors (in
// `storage`) with initialWeights(seed) to out_dir; no tokenizer. Returns the
// parameter count.
int64_t writeRandomModel(const nlohmann::json& config, StDType storage, uint64_t seed, const std::string& out_dir);

}  // namespace kvscope
