#pragma once
// Does a checkpoint kvscope loaded match the model a capture's role ran?
// The capture's config subset must agree field by field and the input
// embedding's fingerprint (docs/capture-format.md, section 3) must match
// within the format's tolerances, checked before anything runs: a check
// against another checkpoint would name bugs that are not there.
#include <optional>
#include <string>

#include "core/capture/capture_file.h"
#include "core/capture/capture_manifest.h"
#include "core/model/causal_lm.h"
#include "core/model/model_bundle.h"

namespace kvscope {

// "" when `model` is the checkpoint `captured` describes, else why not
// ("num_hidden_layers: the capture says 2, the checkpoint 4").
std::string captureModelMismatch(const CaptureModel& captured, const CausalLM& model);

// What a capture says about `model` (name, config subset, fingerprint), as a
// writer of the format does. nullopt fingerprint: no input embedding found.
CaptureModel describeCaptureModel(CaptureRole role, const std::string& name_or_path, const CausalLM& model);

// The model directory the capture names for `role`, as given or beside the
// capture file, when it holds a config.json; nullopt otherwise.
std::optional<std::string> namedModelDirectory(const CaptureFile& file, CaptureRole role);

// Loads `dir` and refuses it (Error naming the first differing field) when it
// is not the checkpoint `captured` describes.
// `weights`: whether a 16-bit checkpoint stays 16-bit in memory (weight_residency.h).
ModelBundle loadCaptureModel(const std::string& dir, const CaptureModel& captured, const c10::TensorOptions& options,
                             WeightResidency weights = WeightResidency::Stored);

}  // namespace kvscope
