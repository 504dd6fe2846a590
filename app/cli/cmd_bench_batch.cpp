// kvscope-cli bench-batch: tokens per second of batched decoding
// (core/bench/batch_bench.h), batch sizes side by side, plain and
// speculative, medians of interleaved trials; a table, or one JSON object with --json.
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/bench/batch_bench.h"
#include "core/decode/drafter.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/model_bundle.h"
#include "core/runtime/threads.h"

namespace kvscope::cli {
namespace {
namespace fs = std::filesystem;

// Eight prompts of different lengths: text through the target's tokenizer,
// or, for a checkpoint without one, a fixed spread of ids.
std::vector<std::vector<int64_t>> benchPrompts(const ModelBundle& target, int64_t count) {
  static const std::vector<std::string> kTexts{
      "And the LORD spake unto Moses, saying,",
      "In the beginning",
      "Now it came to pass in the days when the judges ruled, that there was a famine in the land.",
      "Blessed is the man",
      "The words of the preacher, the son of David, king in Jerusalem.",
      "Hear, O Israel:",
      "And it came to pass after these things, that God did tempt Abraham, and said unto him,",
      "Vanity of vanities, saith the preacher;"};
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < count; ++i) {
    if (target.has_tokenizer) {
      prompts.push_back(target.tokenizer->encode(kTexts[static_cast<size_t>(i) % kTexts.size()]));
      continue;
    }
    std::vector<int64_t> ids;
    const int64_t length = 8 + (i * 5) % 24, vocab = target.model->config().vocab_size;
    for (int64_t j = 0; j < length; ++j) ids.push_back((j * 7919 + i * 104729 + 13) % vocab);
    prompts.push_back(ids);
  }
  return prompts;
}

void printTable(std::ostream& out, const BatchBenchResult& r) {
  out << std::fixed << std::setprecision(1);
  out << "batch  mode         tokens/s (median of " << r.plan.trials << ")  x batch 1   alpha\n";
  for (const BatchBenchRow& row : r.rows) {
    out << std::setw(5) << row.batch << "  " << std::setw(11) << std::left << (row.speculative ? "speculative" : "plain")
        << std::right << std::setw(14) << row.median_tokens_per_second << std::setw(17) << std::setprecision(2)
        << r.speedupOverOne(row.batch, row.speculative) << std::setw(8)
        << (row.speculative ? std::to_string(row.median_alpha).substr(0, 4) : std::string("-")) << "\n"
        << std::setprecision(1);
  }
}

nlohmann::json toJson(const BatchBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BatchBenchRow& row : r.rows) {
    rows.push_back({{"batch", row.batch},
                    {"mode", row.speculative ? "speculative" : "plain"},
                    {"tokens_per_second", row.tokens_per_second},
                    {"median_tokens_per_second", row.median_tokens_per_second},
                    {"over_batch_1", r.speedupOverOne(row.batch, row.speculative)},
                    {"median_alpha", row.median_alpha},
                    {"tokens", row.tokens}});
  }
  return {{"new_tokens", r.plan.new_tokens}, {"gamma", r.plan.gamma}, {"trials", r.plan.trials}, {"rows", rows}};
}

int runBenchBatch(Args& args) {
  const bool json = args.flag("json");
  BatchBenchPlan plan;
  if (auto sizes = args.idList("batches", "batch size")) plan.batch_sizes = *sizes;
  plan.new_tokens = args.integer("new-tokens", plan.new_tokens);
  plan.gamma = args.integer("gamma", plan.gamma);
  plan.trials = static_cast<int>(args.integer("trials", plan.trials));
  const int64_t threads = args.integer("threads", 0);
  const WeightResidency weights = weightResidency(args);
  const std::string target_dir = modelDirectory(args, "target", "target");
  const auto ngram = args.value("ngram");
  const std::string drafter_dir = args.value("drafter").value_or(ngram ? "none" : "");
  args.finish();
  if (threads != 0) setThreadBudget({checkedThreadCount(threads, "--threads"), false, "--threads"});
  if (plan.new_tokens < 1 || plan.new_tokens > 100000) throw Error("--new-tokens must be 1-100000");

  auto target = std::make_shared<ModelBundle>(loadModelBundle(target_dir, computeOptions(), weights));
  std::shared_ptr<const CausalLM> target_model(target, target->model.get());
  std::shared_ptr<const Drafter> drafter;
  std::string drafter_label = "none";
  if (ngram) {
    drafter = std::make_shared<NgramDrafter>(std::stoll(*ngram));
    drafter_label = "n-gram (n <= " + *ngram + ")";
  } else if (drafter_dir != "none") {
    const std::string dir = drafter_dir.empty() ? bundledModelDirectory("drafter") : drafter_dir;
    auto bundle = std::make_shared<ModelBundle>(loadModelBundle(dir, computeOptions(), weights));
    drafter = std::make_shared<ModelDrafter>(std::shared_ptr<const CausalLM>(bundle, bundle->model.get()), dir);
    drafter_label = dir;
  }
  const int64_t largest = plan.batch_sizes.empty() ? 1 : *std::max_element(plan.batch_sizes.begin(), plan.batch_sizes.end());
  const BatchBenchResult result = runBatchBench(target_model, drafter, benchPrompts(*target, largest), plan);
  if (!json) {
    std::cout << "target " << target_dir << ", drafter " << drafter_label << ", " << plan.new_tokens
              << " new tokens per sequence, gamma " << plan.gamma << ", threads " << threadBudget().budget << "\n";
    printTable(std::cout, result);
  }
  nlohmann::json out = toJson(result);
  out["target"] = target_dir;
  out["drafter"] = drafter_label;
  out["threads"] = threadBudget().budget;
  if (json) printJson(out);
  return 0;
}

const CommandRegistrar kRegister{"bench-batch",
    "bench-batch [--target DIR] [--drafter DIR|none | --ngram N] [--batches 1,4,8] [--new-tokens N] [--gamma G]\n"
    "           [--trials N] [--threads N] [--weights stored|fp32] [--json]\n"
    "           tokens per second of batched decoding, plain and speculative, medians of interleaved trials\n"
    "           (after one warm-up of each); 'x batch 1': the median over batch 1's in the same mode",
    runBenchBatch};

}  // namespace
}  // namespace kvscope::cli
