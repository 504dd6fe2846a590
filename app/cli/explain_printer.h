#pragma once
// kvscope-cli explain's output: the steps of one query's attention (and an
// optional what-if) as one JSON object, or as readable text.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/attention_steps.h"
#include "core/explain/what_if.h"
#include "core/model/model_config.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope::cli {

struct ExplainContext {
  const ModelConfig& config;
  const Tokenizer& tokenizer;
  const std::vector<int64_t>& ids;
};

nlohmann::json explainJson(const ExplainContext& context, const AttentionSteps& steps);
nlohmann::json whatIfJson(const ExplainContext& context, const CacheEdit& edit, const WhatIf& result);

void printExplanation(std::ostream& out, const ExplainContext& context, const AttentionSteps& steps);
void printWhatIf(std::ostream& out, const ExplainContext& context, const CacheEdit& edit, const WhatIf& result);

}  // namespace kvscope::cli
