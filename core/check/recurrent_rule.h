#pragma once
// The rule a hybrid model's recurrent states must keep (docs/capture-format-v3.md,
// "Recurrent state"), read off a capture's state identities alone: a call whose
// first input is at position p resumes, in every recurrent layer and for both
// state kinds, from the state after position p - 1 computed over the committed
// tokens 0 .. p - 1 (at position 0: from a state no call computed). Judged per
// sequence view (capture_sequence.h); the one walker asks it at each forward
// (capture_rules.h). Torch-free.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/capture/capture_manifest.h"

namespace kvscope {

struct RecurrentBreach {
  int64_t layer = 0;
  CaptureStateKind kind = CaptureStateKind::Conv;
  std::optional<int64_t> state_after;  // nullopt: a state no recorded call computed
  int64_t required_after = -1;
  std::optional<int64_t> rejected_drafts_of;  // the call whose inputs the state holds but the sequence did not keep
  std::string what;                           // "target call 5 resumed from the conv state of layer 0 ..."
};

// A token a recurrent state folded in: at `position`, fed by that role's `call`.
struct RecurrentFed {
  int64_t position = 0;
  int64_t token = 0;
  int64_t call = 0;
};

// The tokens state `id` of `role` was computed over, oldest first: its `from`
// chain's (stops at a state no call of `manifest` computed).
std::vector<RecurrentFed> recurrentStateTokens(const CaptureManifest& manifest, CaptureRole role, int64_t id);

// The first state (layer, then conv before ssm) `call` resumed from that breaks
// the rule; nullopt when none does or the call records no states. `manifest`
// is one sequence's (sequence 0 of its calls).
std::optional<RecurrentBreach> recurrentBreach(const CaptureManifest& manifest, const CaptureCall& call);

}  // namespace kvscope
