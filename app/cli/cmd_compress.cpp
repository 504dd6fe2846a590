// kvscope-cli compress: the KV compression lab (core/compress/compression_lab.h).
// One policy and budget against a full-cache shadow, or --sweep: every
// eviction policy at 25/50/75% and per-token vs per-channel pruning at 50 and
// 70% sparsity, magnitude vs output-aware, as one table.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/compress_report.h"
#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/bundled_models.h"

namespace kvscope::cli {

namespace {

// The sweep's default text when no prompt is given: Genesis 1 (KJV), in the
// bundled models' domain; long enough that the dense window leaves rows to prune.
constexpr const char* kSweepPrompt =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the "
    "light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and "
    "the morning were the first day. And God said, Let there be a firmament in the midst of the waters, and let it "
    "divide the waters from the waters. And God made the firmament, and divided the waters which were under the "
    "firmament from the waters which were above the firmament: and it was so.";
constexpr const char* kSweepContinuation =
    " And God called the firmament Heaven. And the evening and the morning were the second day. And God said, Let "
    "the waters under the heaven be gathered together unto one place, and let the dry land appear: and it was so. "
    "And God called the dry land Earth; and the gathering together of the waters called he Seas: and God saw that "
    "it was good.";

// An option the chosen policy does not read is refused, not ignored: a user
// who gives --sinks to h2o expects it to matter. Which policy reads which
// option is the policy table's (core/cache/eviction_policy_table.h).
void refuseOptionsOfOtherPolicies(Args& args, EvictionPolicy policy, bool output_aware_pruning) {
  const EvictionPolicyInfo& chosen = evictionPolicyInfo(policy);
  for (EvictionOption option : allEvictionOptions()) {
    const std::string name = evictionOptionName(option);
    // --window is also element pruning's query window (output-aware scores).
    const bool pruning_reads = option == EvictionOption::Window && output_aware_pruning;
    if (!args.value(name) || chosen.reads(option) || pruning_reads) continue;
    const std::string readers = "--policy " + policiesReading(option) +
                                (option == EvictionOption::Window ? ", and --score output-aware" : "");
    throw Error("--" + name + " is for " + readers + ", not --policy " + chosen.name);
  }
}

std::optional<EvictionSettings> evictionSettings(Args& args) {
  const auto policy = args.value("policy");
  const bool any = args.value("budget") || args.value("budget-rows") || args.value("sinks") || args.value("kernel") ||
                   args.value("seed") || args.value("demote");
  if (!policy) {
    if (any) throw Error("--budget, --budget-rows, --sinks, --kernel, --seed and --demote need --policy");
    return std::nullopt;
  }
  EvictionSettings e;
  e.policy = parseEvictionPolicy(*policy);
  const bool output_aware_pruning =
      (args.value("element") || args.value("prune")) && args.value("score").value_or("") == "output-aware";
  refuseOptionsOfOtherPolicies(args, e.policy, output_aware_pruning);
  e.budget.fraction = args.number("budget", 0.5);
  e.budget.rows = args.integer("budget-rows", 0);
  if (args.value("budget") && args.value("budget-rows")) throw Error("give either --budget or --budget-rows, not both");
  if (args.value("budget-rows") && e.budget.rows < 1) {
    throw Error("--budget-rows must be >= 1, got " + std::to_string(e.budget.rows));
  }
  e.sinks = args.integer("sinks", 4);
  e.window = args.integer("window", -1);
  e.kernel = args.integer("kernel", 5);
  const int64_t seed = args.integer("seed", 0);
  if (seed < 0) throw Error("--seed must be >= 0, got " + std::to_string(seed));
  e.seed = static_cast<uint64_t>(seed);
  e.demote_bits = args.integer("demote", 0);
  if (args.value("demote") && e.demote_bits == 0) throw Error("--demote must be 8 or 4 (bits of the demoted copies), got 0");
  e.validate();
  return e;
}

std::optional<PruneSettings> pruneSettings(Args& args) {
  auto axis = args.value("element");
  if (auto prune = args.value("prune")) {  // another name for the same option (element pruning)
    if (axis) throw Error("give either --element or --prune, not both");
    axis = prune;
  }
  const bool any = args.value("k-sparsity") || args.value("v-sparsity") || args.value("score") ||
                   args.value("dense-window");
  if (!axis) {
    if (any) throw Error("--k-sparsity, --v-sparsity, --score and --dense-window need --element per-token|per-channel");
    return std::nullopt;
  }
  PruneSettings p;
  p.axis = parsePruneAxis(*axis);
  p.score = parseElementScore(args.value("score").value_or("magnitude"));
  p.k_sparsity = args.number("k-sparsity", 0.5);
  p.v_sparsity = args.number("v-sparsity", 0.5);
  p.dense_window = args.integer("dense-window", 32);
  if (args.value("window")) {
    if (p.score != ElementScore::OutputAware && !args.value("policy")) {
      throw Error("--window is for --score output-aware (or --policy " + policiesReading(EvictionOption::Window) +
                  "), not magnitude scores");
    }
    p.query_window = args.integer("window", 16);
  }
  p.validate();
  return p;
}

// A continuation is teacher-forced through the model, so it must fit its
// context (the bundled target's 512 tokens are about 2 kB of text): 16 MiB
// is thousands of times more, and bounds what the tokenizer is handed.
constexpr size_t kMaxTextFileBytes = size_t{16} << 20;

std::vector<int64_t> continuationIds(Args& args, const ModelBundle& bundle) {
  const auto text = args.value("continuation");
  const auto file = args.value("text-file");
  const auto ids = args.idList("continuation-ids");
  if ((text ? 1 : 0) + (file ? 1 : 0) + (ids ? 1 : 0) > 1) {
    throw Error("give at most one of --continuation, --continuation-ids and --text-file");
  }
  if (ids) return *ids;
  if ((text || file) && !bundle.has_tokenizer) {
    throw Error("--continuation and --text-file need a tokenizer, but " + bundle.dir +
                " has no tokenizer.json: give --continuation-ids 1,2,3");
  }
  if (text) return bundle.tokenizer->encode(*text, false);
  if (file) return bundle.tokenizer->encode(readFileBytes(*file, kMaxTextFileBytes, "--text-file"), false);
  return {};
}

void checkIds(const std::vector<int64_t>& ids, const ModelBundle& bundle, const char* what) {
  const int64_t vocab = bundle.model->config().vocab_size;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab) {
      throw Error(std::string(what) + ": token id " + std::to_string(id) + " out of range [0, " +
                  std::to_string(vocab - 1) + "]");
    }
  }
}

// The best wall time of 3 runs: the first run pays for warm-up (allocator,
// thread pool) that would otherwise count against whichever runs first.
template <class Run>
double secondsOf(Run&& run) {
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = i == 0 ? seconds : std::min(best, seconds);
  }
  return best;
}

// Greedy decoding of the target alone: the output every speculation row must
// reproduce, and the time a speedup is measured against.
struct Baseline {
  std::vector<int64_t> tokens;
  double seconds = 0;
};

Baseline greedyBaseline(const CausalLM& target, const std::vector<int64_t>& prompt, int64_t max_new) {
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  Baseline baseline;
  baseline.seconds = secondsOf([&] { baseline.tokens = generateAutoregressive(target, prompt, options, {}).ids; });
  return baseline;
}

// How the speculation rows run: gamma and the drafting cache's layout.
struct SpeculationSettings {
  int64_t gamma = 4;
  DraftCacheLayout layout = DraftCacheLayout::Compacted;
};

SpeculationRow speculate(const std::string& label, const CausalLM& target, const std::vector<int64_t>& prompt,
                         const CompressionSpec& spec, const SpeculationSettings& settings, const Baseline& baseline,
                         const CausalLM* drafter = nullptr) {
  SpeculationRow row{label, {}, 0, baseline.seconds};
  SelfSpeculationOptions options;
  options.gamma = settings.gamma;
  options.max_new = static_cast<int64_t>(baseline.tokens.size());
  options.layout = settings.layout;
  row.seconds = secondsOf([&] { row.result = runSelfSpeculation(target, prompt, spec, options, drafter); });
  if (row.result.tokens != baseline.tokens) {
    throw Error("speculation with " + label + " did not reproduce the target's greedy output (a bug)");
  }
  return row;
}

struct SweepSpeculation {
  SpeculationSettings settings;
  int64_t max_new = 128;
  const ModelBundle* drafter = nullptr;
};

std::vector<SpeculationRow> speculationSweep(const ModelBundle& bundle, const std::vector<int64_t>& prompt,
                                             const SweepSpeculation& sweep) {
  const Baseline baseline = greedyBaseline(*bundle.model, prompt, sweep.max_new);
  std::vector<SpeculationRow> rows;
  rows.push_back(speculate("target, full cache", *bundle.model, prompt, {}, sweep.settings, baseline));
  if (sweep.drafter != nullptr) {
    rows.push_back(speculate("bundled drafter", *bundle.model, prompt, {}, sweep.settings, baseline,
                             sweep.drafter->model.get()));
  }
  for (EvictionPolicy policy : allEvictionPolicies()) {
    for (double budget : {0.25, 0.5}) {
      const CompressionSpec spec = CompressionSpec::evicting(policy, budget);
      rows.push_back(speculate("target, " + describeSpec(spec), *bundle.model, prompt, spec, sweep.settings, baseline));
    }
  }
  return rows;
}

int runSweep(const ModelBundle& bundle, const CompressionInput& input, const PruneSettings& base,
             const SweepSpeculation& speculation, bool json) {
  std::vector<SweepRow> eviction, pruning;
  for (EvictionPolicy policy : allEvictionPolicies()) {
    for (double budget : {0.25, 0.5, 0.75}) {
      const CompressionSpec spec = CompressionSpec::evicting(policy, budget);
      eviction.push_back({spec, runCompressionLab(*bundle.model, input, spec)});
    }
  }
  for (PruneAxis axis : {PruneAxis::PerToken, PruneAxis::PerChannel}) {
    for (double sparsity : {0.5, 0.7}) {
      for (ElementScore score : {ElementScore::Magnitude, ElementScore::OutputAware}) {
        CompressionSpec spec;
        spec.pruning = base;
        spec.pruning->axis = axis;
        spec.pruning->score = score;
        spec.pruning->k_sparsity = spec.pruning->v_sparsity = sparsity;
        pruning.push_back({spec, runCompressionLab(*bundle.model, input, spec)});
      }
    }
  }
  const auto speculation_rows = speculationSweep(bundle, input.prompt, speculation);
  nlohmann::json result = sweepJson(eviction, pruning);
  result["self_speculation"] = nlohmann::json::array();
  for (const SpeculationRow& row : speculation_rows) result["self_speculation"].push_back(speculationJson(row));
  result["gamma"] = speculation.settings.gamma;
  result["draft_cache"] = draftCacheLayoutName(speculation.settings.layout);
  result["model"] = bundle.dir;
  result["prompt_tokens"] = input.prompt.size();
  result["steps"] = eviction.empty() ? 0 : eviction.front().result.steps.size();
  if (!json) {
    std::cout << "kvscope compression sweep on " << bundle.dir << ": prompt of " << input.prompt.size()
              << " tokens (prefill " << input.prompt.size() - 1 << " rows compressed), "
              << eviction.front().result.steps.size() << " teacher-forced steps\n\n";
    printSweep(std::cout, eviction, pruning);
    printSpeculation(std::cout, speculation.settings.gamma, speculation_rows);
  }
  if (json) printJson(result);
  return 0;
}

// One compression against the full-cache shadow; with a gamma, also
// self-speculation with the same compression on the drafting copy of the cache.
int runOne(const ModelBundle& bundle, const CompressionInput& input, const CompressionSpec& spec,
           std::optional<SpeculationSettings> speculation, bool json) {
  const CompressionResult result = runCompressionLab(*bundle.model, input, spec);
  nlohmann::json out = compressionJson(spec, result);
  if (!json) printCompression(std::cout, spec, result);
  if (speculation) {
    const Baseline baseline = greedyBaseline(*bundle.model, input.prompt, std::max<int64_t>(input.max_new, 1));
    const SpeculationRow row =
        speculate("target, " + describeSpec(spec), *bundle.model, input.prompt, spec, *speculation, baseline);
    out["self_speculation"] = speculationJson(row);
    out["draft_cache"] = draftCacheLayoutName(speculation->layout);
    if (!json) printSpeculation(std::cout, speculation->gamma, {row});
  }
  if (json) printJson(out);
  return 0;
}

int runCompress(Args& args) {
  const bool json = args.flag("json");
  const bool sweep = args.flag("sweep");
  const std::string dir = modelDirectory(args, "model", "target");
  CompressionSpec spec;
  spec.eviction = evictionSettings(args);
  spec.pruning = pruneSettings(args);
  CompressionInput input;
  const bool has_max_new = args.value("max-new").has_value();
  input.max_new = args.integer("max-new", 16);
  const auto gamma = args.value("gamma") ? std::optional<int64_t>(args.integer("gamma", 4)) : std::nullopt;
  const auto layout = args.value("draft-cache");
  if (layout && !gamma && !sweep) throw Error("--draft-cache is for --gamma G or --sweep (the self-speculation rows)");
  const DraftCacheLayout draft_cache = parseDraftCacheLayout(layout.value_or("compacted"));
  const auto drafter_dir = args.value("drafter");
  const bool has_prompt = args.value("prompt") || args.value("prompt-ids");
  if (!sweep && !spec.eviction && !spec.pruning) {
    throw Error("give --policy NAME (token eviction) and/or --element per-token|per-channel (element pruning), or --sweep");
  }
  if (sweep && spec.eviction) throw Error("--sweep runs every policy: drop --policy and its options");
  const bool bundled = !args.value("model");
  const WeightResidency weights = weightResidency(args);
  const ModelBundle bundle = loadModelBundle(dir, computeOptions(), weights);
  input.prompt = sweep && !has_prompt ? bundle.tokenizer->encode(kSweepPrompt) : promptIds(args, bundle);
  input.continuation = continuationIds(args, bundle);
  if (sweep && !has_prompt && input.continuation.empty()) input.continuation = bundle.tokenizer->encode(kSweepContinuation, false);
  args.finish();
  // A continuation sets the steps (its tokens are fed one by one): --max-new
  // would be ignored, so it is refused like any option that does not apply.
  if (!sweep && has_max_new && !input.continuation.empty()) {
    throw Error("--max-new is for steps without a continuation: the continuation's " +
                std::to_string(input.continuation.size()) + " tokens set the steps");
  }
  checkIds(input.prompt, bundle, "--prompt-ids");
  checkIds(input.continuation, bundle, "--continuation-ids");
  if (sweep) {
    // The bundled drafter is the baseline next to self-speculation when the target is bundled too.
    std::optional<ModelBundle> drafter;
    if (drafter_dir || bundled) drafter = loadModelBundle(drafter_dir.value_or(bundledModelDirectory("drafter")), computeOptions(), weights);
    SweepSpeculation speculation{{gamma.value_or(4), draft_cache}, has_max_new ? input.max_new : 128,
                                 drafter ? &*drafter : nullptr};
    return runSweep(bundle, input, spec.pruning.value_or(PruneSettings{}), speculation, json);
  }
  if (drafter_dir) throw Error("--drafter is for --sweep (the baseline next to self-speculation)");
  const auto speculation = gamma ? std::optional<SpeculationSettings>(SpeculationSettings{*gamma, draft_cache}) : std::nullopt;
  return runOne(bundle, input, spec, speculation, json);
}

const CommandRegistrar kRegister{"compress",
    "compress [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) [--continuation TEXT | --continuation-ids 1,2\n"
    "           | --text-file F] [--max-new N] --policy " + evictionPolicyNames("|") + "\n"
    "           [--budget FRACTION (default 0.5) | --budget-rows N] [--sinks N] [--window N] [--kernel K] [--seed S]\n"
    "           [--demote 8|4 (keep dropped rows as int8/int4 copies instead of evicting them)]\n"
    "           [--element (or --prune) per-token|per-channel --k-sparsity X --v-sparsity X --score magnitude|output-aware\n"
    "           --dense-window N] [--gamma G [--draft-cache compacted|masked|rerotated]] [--json]\n"
    "           compresses the prompt's cache and compares every next step with a full-cache shadow (KL,\n"
    "           top-1, attention mass, perplexity, bytes); --gamma G also drafts with the compressed cache and\n"
    "           verifies with the full one (alpha, speedup; the drafting copy compacts to the kept rows unless\n"
    "           --draft-cache masked; rerotated also moves kept keys to contiguous positions). compress --sweep\n"
    "           [--prompt ...] [--gamma G] [--drafter DIR] [--draft-cache ...]: every policy at budgets 25/50/75%,\n"
    "           pruning at 50/70% sparsity, and self-speculation at 25/50% next to the bundled drafter, as tables\n"
    "           (bundled models by default); --weights stored|fp32 as in `generate`",
    runCompress};

}  // namespace
}  // namespace kvscope::cli
