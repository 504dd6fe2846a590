#pragma once
// Writes a trained model as a Hugging Face directory: config.json,
// model.safetensors, generation_config.json and the tokenizer files.
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"

namespace kvscope {

struct ModelDirectoryContents {
  nlohmann::json config;           // config.json (from llamaTrainingConfig)
  std::string tokenizer_dir;       // copies tokenizer.json, tokenizer_config.json from here; empty: none
  StDType storage = StDType::BF16;  // weights' storage dtype
  nlohmann::json training;         // written as training.json when not null
};

// Creates out_dir if needed; overwrites the files it writes.
void writeModelDirectory(const CausalLM& model, const ModelDirectoryContents& contents, const std::string& out_dir);

}  // namespace kvscope
