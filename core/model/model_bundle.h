#pragma once
// Everything loaded from one Hugging Face model directory: the network, its
// tokenizer and its end-of-sequence ids.
#include <memory>
#include <string>
#include <vector>

#include <c10/core/TensorOptions.h>

#include "core/model/causal_lm.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {

struct ModelBundle {
  std::string dir;
  std::unique_ptr<CausalLM> model;
  std::unique_ptr<Tokenizer> tokenizer;
  // From generation_config.json / config.json, plus the tokenizer's EOS.
  std::vector<int64_t> eos_ids;

  bool isEos(int64_t id) const;
};

// Throws Error naming the directory and problem (missing files, bad config,
// tokenizer larger than the model's vocabulary, ...).
ModelBundle loadModelBundle(const std::string& dir, const c10::TensorOptions& options);

}  // namespace kvscope
