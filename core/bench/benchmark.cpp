#include "core/bench/benchmark.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include <torch/version.h>

#include "core/bench/matmul_baseline.h"
#include "core/bench/multiply_add_peak.h"
#include "core/bench/read_bound.h"
#include "core/bench/speculative_bench.h"
#include "core/bench/verify_forward_bench.h"
#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/model_bundle.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

void say(const BenchProgress& progress, const std::string& what) {
  if (progress) progress(what);
}

// The first `n` ids of the prompt repeated: long contexts for timing, where
// what the tokens say does not matter.
std::vector<int64_t> cycledIds(const std::vector<int64_t>& prompt, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(prompt[static_cast<size_t>(i) % prompt.size()]);
  return ids;
}

std::string firstLineWith(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

nlohmann::json machine() {
  return {{"cpu", firstLineWith("/proc/cpuinfo", "model name")},
          {"cores", std::thread::hardware_concurrency()},
          {"torch_threads", torch::get_num_threads()},
          {"memory", firstLineWith("/proc/meminfo", "MemTotal")},
          {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                           std::to_string(TORCH_VERSION_PATCH)},
          {"compute_dtype", "float32"}};
}

// How the weights are held: the residency asked for and the bytes by dtype.
nlohmann::json weightsReport(const CausalLM& model, WeightResidency weights) {
  nlohmann::json by_dtype = nlohmann::json::object();
  double total = 0;
  for (const auto& [dtype, bytes] : residentBytesByDtype(model)) {
    by_dtype[dtype] = static_cast<double>(bytes) / 1e6;
    total += static_cast<double>(bytes) / 1e6;
  }
  return {{"residency", weightResidencyName(weights)}, {"resident_mb", total}, {"resident_mb_by_dtype", by_dtype}};
}

// Loads `dir` (trials, at most 3; the one kept is the last) and records the
// load time and the memory the first load needed.
std::shared_ptr<ModelBundle> timedLoad(const std::string& dir, const TrialPlan& plan, WeightResidency weights,
                                       nlohmann::json& report) {
  const double rss_before = currentRssMb();
  std::shared_ptr<ModelBundle> bundle;
  std::vector<double> samples;
  double peak_after_first = 0;
  for (int i = 0; i < std::clamp(plan.trials, 1, 3); ++i) {
    bundle.reset();  // never two copies at once
    samples.push_back(elapsedMs([&] { bundle = std::make_shared<ModelBundle>(loadModelBundle(dir, torch::kFloat32, weights)); }));
    if (i == 0) peak_after_first = peakRssMb();
  }
  const ModelConfig& c = bundle->model->config();
  report = {{"dir", dir},
            {"model", describe(c)},
            {"parameters", bundle->model->parameterCount()},
            {"context_length", c.contextLength()},
            {"has_tokenizer", bundle->has_tokenizer},
            {"load", toJson(timingOf(samples))},
            {"rss_before_load_mb", rss_before},
            {"rss_after_load_mb", currentRssMb()},
            {"peak_rss_after_first_load_mb", peak_after_first},
            {"weights", weightsReport(*bundle->model, weights)}};
  return bundle;
}

nlohmann::json autoregressive(const CausalLM& model, const BenchOptions& o) {
  nlohmann::json out = {{"prompt_tokens", o.prompt.size()}, {"new_tokens", o.new_tokens}};
  for (const bool cache : {true, false}) {
    GenerateOptions g;
    g.max_new_tokens = o.new_tokens;
    g.use_cache = cache;
    g.ignore_eos = true;
    const Timing t = timeTrials([&] { generateAutoregressive(model, o.prompt, g, {}); }, o.plan);
    nlohmann::json entry = toJson(t);
    entry["tokens_per_second"] = static_cast<double>(o.new_tokens) / (t.median_ms / 1000.0);
    out[cache ? "cache_on" : "cache_off"] = entry;
  }
  out["cache_speedup"] = out["cache_on"]["tokens_per_second"].get<double>() /
                         out["cache_off"]["tokens_per_second"].get<double>();
  return out;
}

// One cached decode step at `context`: the step's token at position context
// with `context` rows cached; the cache is cut back after every step.
Timing cachedStep(const CausalLM& model, const std::vector<int64_t>& ids, int64_t context, const TrialPlan& plan) {
  c10::InferenceMode guard;
  auto cache = model.makeCache();
  model.forward(idsTensor(std::vector<int64_t>(ids.begin(), ids.begin() + context)), 0, cache.get(), nullptr, 0);
  const at::Tensor next = idsTensor({ids[static_cast<size_t>(context)]});
  return timeTrials([&] { model.forward(next, context, cache.get()); }, plan, [&] { cache->crop(context); });
}

// The same token without a cache: one forward over all context + 1 tokens,
// the logits of the last (as uncached decoding computes them).
Timing uncachedStep(const CausalLM& model, const std::vector<int64_t>& ids, int64_t context, const TrialPlan& plan) {
  c10::InferenceMode guard;
  const at::Tensor all = idsTensor(std::vector<int64_t>(ids.begin(), ids.begin() + context + 1));
  return timeTrials([&] { model.forward(all, 0, nullptr, nullptr, 1); }, plan);
}

nlohmann::json decodeSweep(const CausalLM& model, const BenchOptions& o, const BenchProgress& progress) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t limit = model.config().contextLength();
  for (int64_t context : o.contexts) {
    nlohmann::json entry = {{"context", context}};
    if (context + 1 > limit) {
      entry["skipped"] = "beyond the model's context length " + std::to_string(limit);
      out.push_back(entry);
      continue;
    }
    say(progress, "decode step at context " + std::to_string(context));
    const auto ids = cycledIds(o.prompt, context + 1);
    entry["cache_on"] = toJson(cachedStep(model, ids, context, o.plan));
    if (context <= o.uncached_max_context) {
      entry["cache_off"] = toJson(uncachedStep(model, ids, context, o.plan));
      entry["cache_off_over_on"] = entry["cache_off"]["median_ms"].get<double>() / entry["cache_on"]["median_ms"].get<double>();
    } else {
      entry["cache_off"] = nullptr;  // over --uncached-max-context
    }
    out.push_back(entry);
  }
  return out;
}

// Our forward against the bare matrix products of the same weights: a decode
// step (one row, the bandwidth bound) and a many-row forward.
nlohmann::json againstBaseline(const CausalLM& model, const BenchOptions& o) {
  const MatmulBaseline baseline(model);
  const int64_t limit = model.config().contextLength();
  const int64_t context = std::min(o.bound_context, limit - 1);
  const auto ids = cycledIds(o.prompt, std::max(context + 1, o.prefill_rows));
  baseline.prepare(1);
  const Timing bare_step = timeTrials([&] { baseline.run(1); }, o.plan);
  const Timing our_step = cachedStep(model, ids, context, o.plan);
  const int64_t rows = std::min(o.prefill_rows, limit);
  baseline.prepare(rows);
  const Timing bare_rows = timeTrials([&] { baseline.run(rows); }, o.plan);
  const Timing our_rows = uncachedStep(model, ids, rows - 1, o.plan);
  const double gb = baseline.weightBytes() / 1e9;
  // The stored weights read once at this machine's speed: the least a decode step can take.
  int64_t stored = 0;
  for (const auto& [dtype, bytes] : residentBytesByDtype(model)) stored += bytes;
  const ReadBound read = measureReadBound(stored, o.plan);
  return {{"weight_matrices", baseline.matrices()},
          {"weight_gb_stored", static_cast<double>(stored) / 1e9},
          {"weight_read_pass", toJson(read.pass)},
          {"weight_read_gb_per_s", read.gb_per_s},
          {"decode_over_read_bound", our_step.median_ms / read.pass.median_ms},
          {"weight_gb_fp32", gb},
          {"decode_context", context},
          {"decode_step", toJson(our_step)},
          {"bare_matvec_pass", toJson(bare_step)},
          {"bare_matvec_gb_per_s", gb / (bare_step.median_ms / 1000.0)},
          {"decode_over_bound", our_step.median_ms / bare_step.median_ms},
          {"prefill_rows", rows},
          {"prefill_forward", toJson(our_rows)},
          {"bare_matmul_pass", toJson(bare_rows)},
          {"prefill_over_bare", our_rows.median_ms / bare_rows.median_ms}};
}

// At the decode step's context (forward_vs_baseline's), gamma + 1 rows per
// gamma asked for, 10 pairs per trial of the plan.
nlohmann::json verifyForwards(const CausalLM& model, const BenchOptions& o) {
  const int64_t most_rows = *std::max_element(o.gammas.begin(), o.gammas.end()) + 1;
  const int64_t context = std::max<int64_t>(1, std::min(o.bound_context, model.config().contextLength() - most_rows));
  const auto ids = cycledIds(o.prompt, context + most_rows);
  nlohmann::json gammas = benchVerifyForwards(model, ids, context, o.gammas, 10 * o.plan.trials);
  // The floor under each forward: its matrix products alone at the machine's
  // multiply-add peak, on every thread the forward may use.
  const double peak = multiplyAddPeakPerSecond() * torch::get_num_threads();
  const int64_t per_row = matrixMultiplyAddsPerRow(model);
  const double row_ms = peak > 0 ? 1e3 * static_cast<double>(per_row) / peak : 0.0;
  for (auto& g : gammas) {
    const double at_peak = row_ms * g["rows"].get<double>();
    g["products_at_peak_ms"] = peak > 0 ? nlohmann::json(at_peak) : nlohmann::json();
    g["products_at_peak_over_step"] = peak > 0 ? nlohmann::json(at_peak / g["step_ms"].get<double>()) : nlohmann::json();
  }
  return {{"context", context},
          {"multiply_adds_per_row", per_row},
          {"multiply_add_peak_per_s", peak > 0 ? nlohmann::json(peak) : nlohmann::json()},
          {"gammas", gammas}};
}

std::shared_ptr<const CausalLM> modelOf(const std::shared_ptr<ModelBundle>& bundle) {
  return bundle ? std::shared_ptr<const CausalLM>(bundle, bundle->model.get()) : nullptr;
}

}  // namespace

void BenchOptions::validate() const {
  require(!target_dir.empty(), "bench: no target model directory");
  require(!prompt.empty(), "bench: the prompt is empty");
  require(new_tokens > 0, "bench: new tokens must be positive, got " + std::to_string(new_tokens));
  require(plan.trials > 0, "bench: trials must be positive, got " + std::to_string(plan.trials));
  require(plan.warmup >= 0, "bench: warm-up runs must be >= 0, got " + std::to_string(plan.warmup));
  for (int64_t c : contexts) require(c > 0, "bench: contexts must be positive, got " + std::to_string(c));
  for (int64_t g : gammas) require(g >= 1 && g <= 16, "bench: gamma must be within 1..16, got " + std::to_string(g));
  require(prefill_rows > 0, "bench: prefill rows must be positive");
  require(draft_confidence >= 0.0 && draft_confidence <= 1.0,
          "bench: the draft confidence must be a probability in 0..1 (0: off), got " + std::to_string(draft_confidence));
}

nlohmann::json runBenchmark(const BenchOptions& o, const BenchProgress& progress) {
  o.validate();
  nlohmann::json report = {{"machine", machine()},
                           {"plan", {{"warmup", o.plan.warmup}, {"trials", o.plan.trials},
                                     {"single_run_budget_ms", o.plan.single_run_budget_ms}}}};
  say(progress, "loading " + o.target_dir);
  nlohmann::json target_report, drafter_report;
  const auto target = timedLoad(o.target_dir, o.plan, o.weights, target_report);
  std::shared_ptr<ModelBundle> drafter;
  if (!o.drafter_dir.empty()) {
    say(progress, "loading " + o.drafter_dir);
    drafter = timedLoad(o.drafter_dir, o.plan, o.weights, drafter_report);
    require(drafter->model->config().vocab_size == target->model->config().vocab_size,
            "bench: the drafter's vocabulary (" + std::to_string(drafter->model->config().vocab_size) +
                ") differs from the target's (" + std::to_string(target->model->config().vocab_size) + ")");
  }
  checkFitsContext(*target->model, static_cast<int64_t>(o.prompt.size()), o.new_tokens);
  report["target"] = target_report;
  report["drafter"] = drafter ? drafter_report : nlohmann::json();
  const CausalLM& model = *target->model;

  say(progress, "autoregressive decoding, cache on and off");
  report["autoregressive"] = autoregressive(model, o);
  report["decode_by_context"] = decodeSweep(model, o, progress);
  say(progress, "verify forwards against a decode step");
  report["verify_forwards"] = verifyForwards(model, o);

  SpeculativeBenchSetup setup{modelOf(target), modelOf(drafter), o.prompt, o.new_tokens, o.plan, o.draft_confidence};
  if (drafter) {
    say(progress, "speculative decoding, gamma " + std::to_string(o.gammas.front()) + ".." + std::to_string(o.gammas.back()));
    report["speculative"] = benchSpeculative(setup, o.gammas);
  } else {
    report["speculative"] = nullptr;
  }
  say(progress, "tracing on vs off");
  report["tracing"] = benchTracing(setup, o.tracing_gamma);
  // Before the baseline, which holds its own row-major copy of the weights.
  report["memory"] = {{"peak_rss_mb", peakRssMb()}, {"rss_mb", currentRssMb()}};
  say(progress, "forward vs bare matrix products");
  report["forward_vs_baseline"] = againstBaseline(model, o);
  return report;
}

}  // namespace kvscope
