#pragma once
// Does a checkpoint kvscope loaded match the model a capture's role ran?
// The capture's config subset must agree field by field and the input
// embedding's fingerprint (docs/capture-format.md, section 3) must match
// within the format's tolerances, checked before anything runs: a check
// against another checkpoint would name bugs that are not there.
#include <string>

#include "core/capture/capture_manifest.h"
#include "core/model/causal_lm.h"

namespace kvscope {

// "" when `model` is the checkpoint `captured` describes, else why not
// ("num_hidden_layers: the capture says 2, the checkpoint 4").
std::string captureModelMismatch(const CaptureModel& captured, const CausalLM& model);

// What a capture says about `model` (name, config subset, fingerprint), as a
// writer of the format does. nullopt fingerprint: no input embedding found.
CaptureModel describeCaptureModel(CaptureRole role, const std::string& name_or_path, const CausalLM& model);

}  // namespace kvscope
