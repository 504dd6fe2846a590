#pragma once
// kvscope-cli check's engine: the capture's cache timeline
// (capture_timeline.h), in the order its operations happened
// (capture_record_view.h), walked by the one root-cause walker
// (core/audit/contract_walk.h) with what only a capture knows as its rules
// (capture_rules.h). The root cause is the same RootCause a session's diff
// names, in one JSON form. Separately, the symptom: the first call whose
// logits differ from the reference's beyond noise.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/audit/audit_report.h"
#include "core/audit/root_cause.h"
#include "core/check/capture_record_view.h"
#include "core/check/capture_timeline.h"
#include "core/model/causal_lm.h"

namespace kvscope {

struct CaptureDivergence {
  CaptureRole role = CaptureRole::Target;
  int64_t call = 0;
  int64_t sequence = 0;  // the batch row (0 for one sequence)
  int64_t input = 0;     // the input whose logits differ first
  int64_t position = 0;  // where that input belongs
  double max_abs_delta = 0;          // of log-probabilities, over the vocabulary (top-k: the captured ids)
  std::optional<double> kl;          // KL(reference || engine), full logits only
  int64_t engine_top1 = 0;
  int64_t reference_top1 = 0;
  std::string what;
};

// |delta log p| beyond which a call's logits diverge from the reference's,
// by the dtype the engine's cache stored (its activations are as precise).
double logProbabilityTolerance(StDType cache_dtype);

struct CaptureCheckOptions {
  // The reference models per role (CaptureRole as index); null: that role's
  // values and logits are not checked, only the structure.
  std::array<const CausalLM*, kCaptureRoles> models{nullptr, nullptr};
  // Why a role has no model, for the note that says what was not checked ("": no reason given).
  std::array<std::string, kCaptureRoles> no_model_reason;
};

// One logit row compared with the reference and found within tolerance,
// kept so a view can plot what the check compared, not only where it failed.
struct CaptureLogitRow {
  size_t step = 0;        // into the timeline's steps
  CaptureRole role = CaptureRole::Target;
  int64_t position = 0;   // where the input belongs
  double max_abs_delta = 0;
  std::optional<double> kl;
};

// The rows kept to plot: a view needs no more, and a file of tiny top-k
// rows must not make the check's memory grow with its millions of rows.
constexpr size_t kMaxKeptLogitRows = 65536;

struct CaptureCheckReport {
  std::array<int64_t, kCaptureRoles> calls{0, 0};
  std::optional<RootCause> root_cause;  // event_index: into the walked record (capture_record_view.h)
  std::optional<CaptureDivergence> first_divergence;
  bool committed_inferred = false;
  int64_t rows_value_checked = 0;
  double max_value_error = 0;   // over the rows compared
  int64_t logit_rows_checked = 0;
  // The first kMaxKeptLogitRows rows within tolerance, in the order checked
  // (those before the first divergence: the check stops there).
  std::vector<CaptureLogitRow> agreeing_rows;
  std::vector<std::string> notes;  // what was not checked and why

  bool ok() const { return !root_cause && !first_divergence; }
};

// Checks the capture's `timeline` walked in `view`'s order (made from it).
CaptureCheckReport checkCapture(const CaptureFile& file, const CaptureTimeline& timeline, const CaptureRecordView& view,
                                const CaptureCheckOptions& options, const TokenText& text = {});

}  // namespace kvscope
