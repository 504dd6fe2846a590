#pragma once
// A compression lab run the Compression panel asks the engine thread for:
// one or two settings (slots A and B) on the same prompt, and what comes
// back: per slot, a torch-free summary of the run or the core's error
// message. Plain data: it crosses threads by shared pointer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/compress/compression_summary.h"
#include "core/compress/self_speculation.h"

namespace kvscope::ui {

struct CompressionSlotRequest {
  int slot = 0;       // which of the panel's slots (0: A, 1: B)
  std::string label;  // "h2o 25%" (the panel's words for the settings)
  CompressionSpec spec;
};

struct CompressionRequest {
  int64_t id = 0;                // the panel drops answers to requests it has replaced
  std::vector<int64_t> prompt;   // token ids: the prefill is all but the last
  int64_t max_new = 16;          // greedy steps of the full cache compared after the compression
  // > 0: each slot also drafts for the target over its compressed cache with
  // this gamma for max_new tokens (compressed-cache self-speculation, recorded
  // for SelfSpeculationView); 0: not run.
  int64_t speculate_gamma = 0;
  std::vector<CompressionSlotRequest> settings;  // one per slot to run
};

struct CompressionSlotResult {
  std::string label;
  std::string error;  // the core's Error message; empty when the run succeeded
  CompressionSummary summary;
  // With CompressionRequest::speculate_gamma: the recorded run, or why the core refused it.
  std::shared_ptr<const SelfSpeculationResult> speculation;
  std::string speculation_error;
  double speculation_seconds = 0;  // wall time of that run, both prefills included
  bool ok() const { return error.empty(); }
};

struct CompressionRun {
  CompressionRequest request;
  std::vector<CompressionSlotResult> results;  // one per request.settings entry, in order
  // With speculate_gamma: wall time of plain greedy decoding of the same
  // tokens from the same prompt (prefill included), what self-speculation
  // must beat to be worth it. 0: not measured.
  double plain_seconds = 0;
};
using CompressionRunPtr = std::shared_ptr<const CompressionRun>;

// Runs every slot on `model` (on the engine thread), each with its K/V
// recorded for the views, and self-speculation when asked. A slot's exception
// becomes its error text: one bad slot does not hide the other's result.
CompressionRun runCompressionSlots(const CausalLM& model, const CompressionRequest& request);

}  // namespace kvscope::ui
