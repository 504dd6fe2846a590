#pragma once
// A hybrid capture's recurrent states as the GUI lists them (the Recurrent
// States panel, docs/gui.md): per call, per recurrent layer and kind, the
// state the call resumed from and the one it left, each with its identity
// (the position it is after, the tokens it folded in), and the rule's breach
// (recurrent_rule.h) on the state a call wrongly resumed from. Torch-free.
#include <optional>
#include <vector>

#include "core/audit/root_cause_report.h"
#include "core/capture/capture_manifest.h"
#include "core/snapshot/snapshot.h"

namespace kvscope {

// `manifest`: one sequence's view (capture_sequence.h). `root_cause`: the
// shown check's, marked when it is a `state` breach. Empty when the capture
// records no recurrent states.
std::vector<RecurrentStateRow> recurrentStateRows(const CaptureManifest& manifest,
                                                  const std::optional<RootCause>& root_cause);

}  // namespace kvscope
