#pragma once
// Everything loaded from one Hugging Face model directory: the network, its
// tokenizer (optional: without tokenizer.json the model runs on ids) and its
// end-of-sequence ids.
#include <memory>
#include <string>
#include <vector>

#include <c10/core/TensorOptions.h>

#include "core/model/causal_lm.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/model/weight_residency.h"

namespace kvscope {

struct ModelBundle {
  std::string dir;
  std::unique_ptr<CausalLM> model;
  // Never null: without tokenizer.json an IdTokenizer that shows "<id N>"
  // and refuses to encode text.
  std::unique_ptr<Tokenizer> tokenizer;
  bool has_tokenizer = false;  // tokenizer.json was there
  // From generation_config.json / config.json, plus the tokenizer's EOS.
  std::vector<int64_t> eos_ids;

  bool isEos(int64_t id) const;
};

// Throws Error naming the directory and problem (missing files, bad config,
// a tokenizer.json that does not load or is larger than the model's
// vocabulary, ...). A missing tokenizer.json is not an error. weights: see
// core/model/weight_residency.h.
ModelBundle loadModelBundle(const std::string& dir, const c10::TensorOptions& options,
                            WeightResidency weights = WeightResidency::Stored);

}  // namespace kvscope
