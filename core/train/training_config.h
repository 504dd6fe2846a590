#pragma once
// The model a training run starts from: a Llama config.json completed from
// a small architecture JSON and the tokenizer, and its initial weights
// (random, or copied from another model where names and shapes match).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/causal_lm.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {

// arch: {"hidden_size", "num_hidden_layers", "num_attention_heads",
// "num_key_value_heads", "intermediate_size", optional
// "max_position_embeddings" (512), "rope_theta", "rms_norm_eps",
// "tie_word_embeddings" (true)}. Fills vocab size and BOS/EOS from the
// tokenizer and checks the result with parseModelConfig. Throws Error
// naming `source` for a bad or non-Llama architecture.
nlohmann::json llamaTrainingConfig(const nlohmann::json& arch, const Tokenizer& tokenizer, const std::string& source);

// Normal(0, 0.02) matrices (residual projections scaled by
// 1/sqrt(2 * layers)), unit norms, zero biases; float32.
NamedTensors initialWeights(const ModelConfig& config, uint64_t seed);

// Overwrites the tensors of `weights` that model directory `dir` holds with
// the same name and shape (e.g. a 1-layer drafter from a target's
// embeddings and first layer). Returns how many were copied.
int64_t copyMatchingWeights(NamedTensors& weights, const std::string& dir);

}  // namespace kvscope
