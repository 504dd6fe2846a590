// kvscope-cli bench: kvscope's speed on a model pair (core/bench/benchmark.h),
// printed as a summary, or with --json as one JSON object; --plot DIR adds PNG charts
// (drawn by kvscope-plot, which links Qt; this binary stays Qt-free).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <torch/types.h>

#include "app/cli/bench_summary.h"
#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/bench/benchmark.h"
#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/model/model_config.h"
#include "core/model/tokenizer/tokenizer.h"

namespace kvscope::cli {
namespace {
namespace fs = std::filesystem;

const char* kDefaultPrompt = "And the LORD spake unto Moses, saying,";

// --prompt-ids, --prompt (needs tokenizer.json), the default text with the
// target's tokenizer, or without one a fixed spread of ids.
std::vector<int64_t> benchPrompt(Args& args, const std::string& target_dir) {
  if (auto ids = args.idList("prompt-ids")) return *ids;
  const bool has_tokenizer = fs::exists(fs::path(target_dir) / "tokenizer.json");
  const auto text = args.value("prompt");
  if (text && !has_tokenizer) {
    throw Error("--prompt needs a tokenizer, but " + target_dir +
                " has no tokenizer.json: give the prompt as token ids with --prompt-ids 1,2,3");
  }
  if (has_tokenizer) return Tokenizer::fromDirectory(target_dir)->encode(text.value_or(kDefaultPrompt));
  const int64_t vocab = loadModelConfig((fs::path(target_dir) / "config.json").string()).vocab_size;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 16; ++i) ids.push_back((i * 7919 + 13) % vocab);
  return ids;
}

std::vector<int64_t> listOr(Args& args, const std::string& name, std::vector<int64_t> fallback) {
  auto list = args.idList(name);
  return list ? *list : fallback;
}

// --quick: a few seconds on the bundled pair, for tests; the numbers are rough.
void applyQuick(BenchOptions& o) {
  o.plan = TrialPlan{1, 2, o.plan.single_run_budget_ms};
  o.new_tokens = 12;
  o.contexts = {16, 64};
  o.gammas = {1, 2, 4};
  o.tracing_gamma = 2;
  o.bound_context = 64;
  o.prefill_rows = 32;
}

BenchOptions benchOptions(Args& args) {
  BenchOptions o;
  const bool default_target = !args.value("target");
  o.target_dir = modelDirectory(args, "target", "target");
  // The bundled drafter only pairs with the bundled target's vocabulary.
  const auto drafter = args.value("drafter");
  if (drafter && *drafter != "none") o.drafter_dir = *drafter;
  if (!drafter && default_target) o.drafter_dir = modelDirectory(args, "drafter", "drafter");
  if (args.flag("quick")) applyQuick(o);
  o.plan.trials = static_cast<int>(args.integer("trials", o.plan.trials));
  o.plan.warmup = static_cast<int>(args.integer("warmup", o.plan.warmup));
  o.plan.single_run_budget_ms = args.number("budget-ms", o.plan.single_run_budget_ms);
  o.new_tokens = args.integer("new-tokens", o.new_tokens);
  o.contexts = listOr(args, "contexts", o.contexts);
  o.gammas = listOr(args, "gammas", o.gammas);
  o.draft_confidence = args.number("draft-confidence", o.draft_confidence);
  o.uncached_max_context = args.integer("uncached-max-context", o.uncached_max_context);
  o.bound_context = args.integer("bound-context", o.bound_context);
  o.prefill_rows = args.integer("prefill-rows", o.prefill_rows);
  o.weights = weightResidency(args);
  o.prompt = benchPrompt(args, o.target_dir);
  return o;
}

// Writes bench.json to dir and runs kvscope-plot (built with the GUI, next to
// this binary) on it.
void writePlots(const nlohmann::json& report, const std::string& dir) {
  fs::create_directories(dir);
  const fs::path json_path = fs::path(dir) / "bench.json";
  std::ofstream(json_path) << report.dump(2) << "\n";
  const fs::path plotter = fs::read_symlink("/proc/self/exe").parent_path() / "kvscope-plot";
  if (!fs::exists(plotter)) {
    throw Error("--plot: wrote " + json_path.string() + ", but " + plotter.string() +
                " (built with the GUI, -DKVSCOPE_BUILD_UI=ON) is missing, so no PNGs were drawn");
  }
  const std::string command = "'" + plotter.string() + "' '" + json_path.string() + "' '" + dir + "'";
  if (std::system(command.c_str()) != 0) throw Error("--plot: " + plotter.string() + " failed on " + json_path.string());
}

int runBench(Args& args) {
  const bool json = args.flag("json");
  const auto plot_dir = args.value("plot");
  const int64_t threads = args.integer("threads", 0);
  const BenchOptions options = benchOptions(args);
  args.finish();
  // 0: the process's default (every core, fewer while other programs hold cores).
  if (threads != 0) setThreadBudget({checkedThreadCount(threads, "--threads"), false, "--threads"});

  auto progress = [](const std::string& what) { std::cerr << "bench: " << what << std::endl; };
  const nlohmann::json report = runBenchmark(options, progress);
  if (!json) printBenchSummary(std::cout, report);
  if (plot_dir) writePlots(report, *plot_dir);
  if (json) printJson(report);
  return 0;
}

const CommandRegistrar kRegister{"bench",
    "bench [--target DIR] [--drafter DIR|none] [--quick] [--trials N] [--warmup N] [--new-tokens N]\n"
    "           [--contexts 64,128,...] [--uncached-max-context N] [--gammas 1,2,...] [--draft-confidence P]\n"
    "           [--bound-context N] [--prefill-rows N] [--budget-ms MS] [--prompt TEXT | --prompt-ids ...] [--threads N]\n"
    "           [--weights stored|fp32] [--plot DIR] [--json]",
    runBench};

}  // namespace
}  // namespace kvscope::cli
