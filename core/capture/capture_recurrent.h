#pragma once
// Format version 3's recurrent state of a hybrid model (docs/capture-format-v3.md,
// "Recurrent state"): the manifest's `recurrent_states` (per role, each state
// id's provenance) and a call's `recurrent` (the ids before and after the call,
// and optionally after each input). Validated by name and bound; a hostile
// file gets an Error naming the field, never a crash. Torch-free.
#include <nlohmann/json.hpp>

#include "core/capture/capture_manifest.h"

namespace kvscope::capture_recurrent {

constexpr int64_t kMaxRecurrentStates = int64_t{1} << 22;  // state ids per role

// Fills manifest.recurrent_states from `recurrent_states` (absent: none).
// Refuses the field in a version 1 or 2 file, a role without a model, more
// than kMaxRecurrentStates entries, an id other than its index, a layer
// outside the model's, a kind other than "conv" / "ssm", a call, input or
// position out of bounds, call and input not both set or both null, and a
// `from` that is not an earlier state of the same layer and kind.
void parseRecurrentStates(const std::string& path, const nlohmann::json& manifest_json, CaptureManifest& manifest);

// A call's `recurrent` (absent: nullopt). Refuses it in a version 1 or 2 file,
// a list per state other than one per sequence, more entries per sequence
// than two per layer, an id that names no state of the role or a state of
// another layer or kind, and intermediate ids other than one per input.
std::optional<CaptureCallRecurrent> parseCallRecurrent(const std::string& path, const std::string& what,
                                                       const nlohmann::json& call_json, const CaptureCall& call,
                                                       const CaptureManifest& manifest);

std::string stateKindName(CaptureStateKind kind);

}  // namespace kvscope::capture_recurrent
