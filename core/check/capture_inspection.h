#pragma once
// Opening a capture to look at it (the GUI's File > Open Capture, `kvscope
// FILE.kvcapture`): read and validate it, find the checkpoints it ran, check
// it and turn it into the snapshot every view reads. Unlike `kvscope-cli
// check`, a missing or different checkpoint is not fatal: the capture still
// opens, its structure is checked, and a note says what was not.
#include <array>
#include <memory>
#include <string>
#include <vector>

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

// One sequence of a batch as a picker lists it.
struct InspectedSequence {
  bool root_cause = false;  // the run's root cause is in this sequence
  bool breach = false;      // its own check found a breach
  bool divergence = false;  // its own check found a divergence
};

// One rank of a tensor-parallel run as the rank picker lists it.
struct InspectedRank {
  bool root_cause = false;  // the run's root cause is in this rank
  bool breach = false;      // its own check found a breach (one that may follow from the root cause)
  std::string shard;        // "rank 1 of 2 (target KV heads 2-3 of 4)"
};

struct CaptureInspection {
  std::shared_ptr<const SessionSnapshot> snapshot;  // of the shown sequence
  CaptureCheckReport report;                        // the shown sequence's
  std::array<std::string, kCaptureRoles> model_dirs;  // the checkpoint each role was checked against ("" none)
  std::vector<InspectedSequence> sequences;          // every sequence of the batch (one for batch 1)
  int64_t shown_sequence = 0;
  std::vector<InspectedRank> ranks;  // every rank of a tensor-parallel run (empty for one file)
  int64_t shown_rank = 0;
};

// Throws Error for a file that is not a usable capture (the reader's and
// the timeline's errors, which name the problem). `sequence`: the sequence
// of a batch the snapshot shows; -1: the run's root cause's (else 0).
CaptureInspection inspectCapture(const std::string& path, const std::array<LoadedCaptureModel, kCaptureRoles>& loaded,
                                 SnapshotBuilder& builder, int64_t sequence = -1);

// Every rank's capture of one tensor-parallel run (shard_check.h), checked as
// one run and shown on rank `rank`, -1: the rank of its root cause (else
// rank 0); one path is inspectCapture's.
CaptureInspection inspectCaptures(const std::vector<std::string>& paths,
                                  const std::array<LoadedCaptureModel, kCaptureRoles>& loaded, SnapshotBuilder& builder,
                                  int64_t sequence = -1, int64_t rank = -1);

}  // namespace kvscope
