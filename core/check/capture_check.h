#pragma once
// kvscope-cli check's engine: walks a capture's cache timeline
// (capture_timeline.h) and checks the cache contract after every event,
// for each role: each layer holds exactly the positions the contract
// requires, each row the token of the stream at its position, rotated for
// that position (row_identity.h's verdicts, the same a session's root cause
// uses); a forward's attention mask lets each input see exactly the positions
// before it; the rows a forward wrote equal a reference forward of the stream
// (within a tolerance for the rows' dtype). The first event that fails is the
// root cause. Separately, the symptom: the first call whose logits differ
// from the reference's beyond noise.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/audit_report.h"
#include "core/audit/root_cause.h"
#include "core/check/capture_timeline.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct CaptureBreach {
  size_t step = 0;  // into CaptureTimeline::steps
  CaptureRole role = CaptureRole::Target;
  int64_t call = 0;
  CaptureOperation operation = CaptureOperation::Forward;
  // between: the change ("none", "crop", "slice", "reset", "overwrite",
  // "roll", "replace"); forward: "refed_prefix", "skipped_position",
  // "unwritten", "positions", "tokens", "window", "empty_slot", "rows", "mask", "values",
  // "no_cache".
  std::string kind;
  std::string what;                  // one sentence for people
  std::vector<int64_t> rows;         // rows breaking the contract (first such layer), in the layer's position order
  std::vector<int64_t> layers;
  int64_t expected_rows = 0;
  int64_t actual_rows = 0;
  std::vector<RowVerdict> verdicts;  // those rows, described
};

struct CaptureDivergence {
  CaptureRole role = CaptureRole::Target;
  int64_t call = 0;
  int64_t input = 0;     // the input whose logits differ first
  int64_t position = 0;  // where that input belongs
  double max_abs_delta = 0;          // of log-probabilities, over the vocabulary (top-k: the captured ids)
  std::optional<double> kl;          // KL(reference || engine), full logits only
  int64_t engine_top1 = 0;
  int64_t reference_top1 = 0;
  std::string what;
};

// Tolerances by the dtype the engine's cache stored (float32 / float16 / bfloat16).
struct CaptureTolerance {
  AuditTolerance rows;          // K/V rows against the reference
  double log_probability = 0;   // |delta log p| beyond which logits diverge
};
CaptureTolerance captureTolerance(StDType cache_dtype);

struct CaptureCheckOptions {
  // The reference models per role (CaptureRole as index); null: that role's
  // values and logits are not checked, only the structure.
  std::array<const CausalLM*, kCaptureRoles> models{nullptr, nullptr};
};

struct CaptureCheckReport {
  std::array<int64_t, kCaptureRoles> calls{0, 0};
  std::optional<CaptureBreach> root_cause;
  std::optional<CaptureDivergence> first_divergence;
  bool committed_inferred = false;
  int64_t rows_value_checked = 0;
  double max_value_error = 0;   // over the rows compared
  int64_t logit_rows_checked = 0;
  std::vector<std::string> notes;  // what was not checked and why

  bool ok() const { return !root_cause && !first_divergence; }
};

CaptureCheckReport checkCapture(const CaptureFile& file, const CaptureTimeline& timeline,
                                const CaptureCheckOptions& options, const TokenText& text = {});

}  // namespace kvscope
