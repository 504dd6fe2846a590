// kvscope-cli explain: one query's attention step by step (through o_proj),
// with the model's own numbers (core/explain/attention_steps.h), and what removing or zeroing
// cache entries would change (core/explain/what_if.h).
#include <iostream>
#include <optional>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/explain_printer.h"
#include "core/error.h"
#include "core/model/model_bundle.h"

namespace kvscope::cli {

namespace {

int64_t requiredInteger(Args& args, const std::string& name) {
  if (!args.value(name)) throw Error("missing required option --" + name);
  return args.integer(name, 0);
}

// The flag's value in [0, count), or an Error naming the flag and the range.
void requireFlagInRange(const std::string& flag, int64_t value, int64_t count, const std::string& what) {
  if (value >= 0 && value < count) return;
  throw Error("option --" + flag + ": " + std::to_string(value) + " is out of range: " + what +
              (count > 0 ? " (valid: 0-" + std::to_string(count - 1) + ")" : " (no valid value)"));
}

// Every option checked against the model and the prompt before anything is
// computed, so a wrong number is named by its flag rather than surfacing as
// the core's "layer 7 is out of range" or the what-if's row message.
void checkExplainOptions(const ModelConfig& config, int64_t tokens, const AttentionQuery& query,
                         const CacheEdit& edit) {
  requireFlagInRange("layer", query.layer, config.num_layers,
                     "the model has " + std::to_string(config.num_layers) + " layers");
  requireFlagInRange("head", query.head, config.num_heads,
                     "the model has " + std::to_string(config.num_heads) + " query heads");
  requireFlagInRange("position", query.position, tokens, "the prompt has " + std::to_string(tokens) + " tokens");
  const std::string rows = "the query at position " + std::to_string(query.position) +
                           " reads earlier rows only (its own is written by its forward)";
  for (int64_t row : edit.remove_positions) requireFlagInRange("drop-rows", row, query.position, rows);
  for (int64_t row : edit.zero_positions) requireFlagInRange("zero-rows", row, query.position, rows);
  const std::string channels = "head_dim is " + std::to_string(config.head_dim);
  for (int64_t c : edit.zero_key_channels) requireFlagInRange("zero-k-channels", c, config.head_dim, channels);
  for (int64_t c : edit.zero_value_channels) requireFlagInRange("zero-v-channels", c, config.head_dim, channels);
}

CacheEdit cacheEdit(Args& args) {
  CacheEdit edit;
  edit.remove_positions = args.idList("drop-rows", "row").value_or(std::vector<int64_t>{});
  edit.zero_key_channels = args.idList("zero-k-channels", "channel").value_or(std::vector<int64_t>{});
  edit.zero_value_channels = args.idList("zero-v-channels", "channel").value_or(std::vector<int64_t>{});
  edit.zero_positions = args.idList("zero-rows", "row").value_or(std::vector<int64_t>{});
  if (!edit.zero_positions.empty() && edit.zero_key_channels.empty() && edit.zero_value_channels.empty()) {
    throw Error("--zero-rows says which rows --zero-k-channels / --zero-v-channels apply to; give one of them");
  }
  return edit;
}

int runExplain(Args& args) {
  const bool json = args.flag("json");
  const std::string dir = modelDirectory(args, "model", "target");
  AttentionQuery query;
  query.layer = requiredInteger(args, "layer");
  query.head = requiredInteger(args, "head");
  std::optional<int64_t> position;
  if (args.value("position")) position = args.integer("position", 0);
  const CacheEdit edit = cacheEdit(args);
  const ModelBundle bundle = loadModelBundle(dir, computeOptions(), weightResidency(args));
  const auto ids = promptIds(args, bundle);
  args.finish();
  // Default: the last prompt token, whose query predicts the next token.
  query.position = position.value_or(static_cast<int64_t>(ids.size()) - 1);
  checkExplainOptions(bundle.model->config(), static_cast<int64_t>(ids.size()), query, edit);

  // Both computed before anything is printed: a bad edit prints only its error.
  const AttentionSteps steps = attentionSteps(*bundle.model, ids, query);
  const std::optional<WhatIf> changed =
      edit.empty() ? std::nullopt : std::optional<WhatIf>(whatIf(*bundle.model, ids, query, edit));
  const ExplainContext context{bundle.model->config(), *bundle.tokenizer, ids};
  if (!json) {
    printExplanation(std::cout, context, steps);
    if (changed) printWhatIf(std::cout, context, edit, *changed);
    return 0;
  }
  nlohmann::json result = explainJson(context, steps);
  result["what_if"] = changed ? whatIfJson(context, edit, *changed) : nlohmann::json(nullptr);
  printJson(result);
  return 0;
}

const CommandRegistrar kRegister{"explain",
    "explain [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) --layer L --head H [--position P] [--weights stored|fp32] [--json]\n"
    "           [--drop-rows 3,5] [--zero-k-channels 0,1] [--zero-v-channels 2] [--zero-rows 3,4]\n"
    "           one query's attention step by step, through o_proj (this head's share and the layer's\n"
    "           attention output; default position: the last token); the options after\n"
    "           the first line recompute it with those cache rows of the layer removed or channels zeroed",
    runExplain};

}  // namespace
}  // namespace kvscope::cli
