#include "ui/engine/CompressionJob.h"

#include <exception>

namespace kvscope::ui {

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
    run.results.push_back(std::move(result));
  }
  return run;
}

}  // namespace kvscope::ui
