#include "ui/engine/CompressionJob.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/decode/autoregressive.h"

namespace kvscope::ui {

namespace {

template <typename Work>
double secondsOf(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The baseline of the speed shown beside self-speculation: the target alone,
// greedy, as many tokens (self-speculation's runs never stop at EOS either).
double plainDecodingSeconds(const CausalLM& model, const CompressionRequest& request) {
  GenerateOptions options;
  options.max_new_tokens = std::max<int64_t>(request.max_new, 1);
  options.ignore_eos = true;
  return secondsOf([&] { generateAutoregressive(model, request.prompt, options, {}); });
}

void speculate(const CausalLM& model, const CompressionRequest& request, const CompressionSpec& spec,
               CompressionSlotResult& result) {
  SelfSpeculationOptions options;
  options.gamma = request.speculate_gamma;
  options.max_new = std::max<int64_t>(request.max_new, 1);
  options.record = true;
  try {
    std::shared_ptr<const SelfSpeculationResult> run;
    result.speculation_seconds =
        secondsOf([&] { run = std::make_shared<const SelfSpeculationResult>(runSelfSpeculation(model, request.prompt, spec, options)); });
    result.speculation = std::move(run);
  } catch (const std::exception& error) {
    result.speculation_error = error.what();
  }
}

}  // namespace

CompressionRun runCompressionSlots(const CausalLM& model, const CompressionRequest& request) {
  CompressionRun run;
  run.request = request;
  CompressionInput input;
  input.prompt = request.prompt;
  input.max_new = request.max_new;
  input.record_cache = true;
  for (const CompressionSlotRequest& slot : request.settings) {
    CompressionSlotResult result;
    result.label = slot.label;
    try {
      result.summary = summarizeCompression(runCompressionLab(model, input, slot.spec), model.config());
    } catch (const std::exception& error) {
      result.error = error.what();
    }
    if (request.speculate_gamma > 0 && result.ok()) speculate(model, request, slot.spec, result);
    run.results.push_back(std::move(result));
  }
  // Measured last, when every slot has warmed the process up: a first
  // forward pays for thread pools and allocations.
  const bool speculated = std::any_of(run.results.begin(), run.results.end(), [](const auto& r) { return r.speculation != nullptr; });
  if (speculated) {
    try {
      run.plain_seconds = plainDecodingSeconds(model, request);
    } catch (const std::exception&) {
      run.plain_seconds = 0;  // the speed is then not shown; the slots' results stand
    }
  }
  return run;
}

}  // namespace kvscope::ui
