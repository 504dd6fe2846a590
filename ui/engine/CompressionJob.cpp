#include "ui/engine/CompressionJob.h"

#include <algorithm>
#include <exception>

namespace kvscope::ui {

namespace {

void speculate(const CausalLM& model, const CompressionRequest& request, const CompressionSpec& spec,
               CompressionSlotResult& result) {
  SelfSpeculationOptions options;
  options.gamma = request.speculate_gamma;
  options.max_new = std::max<int64_t>(request.max_new, 1);
  options.record = true;
  try {
    result.speculation = std::make_shared<const SelfSpeculationResult>(runSelfSpeculation(model, request.prompt, spec, options));
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
  return run;
}

}  // namespace kvscope::ui
