#pragma once
// Opening a capture to look at it (the GUI's File > Open Capture, `kvscope
// FILE.kvcapture`): read and validate it, find the checkpoints it ran, check
// it and turn it into the snapshot every view reads. Unlike `kvscope-cli
// check`, a missing or different checkpoint is not fatal: the capture still
// opens, its structure is checked, and a note says what was not.
#include <array>
#include <memory>
#include <string>

#include "core/check/capture_check.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/snapshot/snapshot.h"

namespace kvscope {

class SnapshotBuilder;

// A model already loaded (the GUI's target and drafter), tried first.
struct LoadedCaptureModel {
  std::shared_ptr<const CausalLM> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string dir;
};

struct CaptureInspection {
  std::shared_ptr<const SessionSnapshot> snapshot;
  CaptureCheckReport report;
  std::array<std::string, kCaptureRoles> model_dirs;  // the checkpoint each role was checked against ("" none)
};

// Throws Error for a file that is not a usable capture (the reader's and
// the timeline's errors, which name the problem).
CaptureInspection inspectCapture(const std::string& path, const std::array<LoadedCaptureModel, kCaptureRoles>& loaded,
                                 SnapshotBuilder& builder);

}  // namespace kvscope
