#pragma once
// The manifest JSON of a .kvcapture into CaptureManifest structs: field
// types, the format's limits, and every rule the manifest can be checked
// against on its own (roles known, indices 0, 1, 2, ... per role, positions
// as many as inputs, runs well formed). Checks against the tensor table are
// CaptureValidator's. Each function is one step of the spec's validation
// order (docs/capture-format.md, section 7); CaptureFile::open calls them in
// that order. Errors: Error("<path>: <where>: <problem>"). Torch-free.
#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/capture/capture_manifest.h"

namespace kvscope {

// Step 2: the three metadata strings, then the manifest parsed within
// capture_limits::kManifestJsonLimits, with format and version 1 or 2 (the
// same in the metadata and the manifest).
nlohmann::json parseCaptureMetadata(const std::string& path, const std::map<std::string, std::string>& metadata);

// Step 4: version, batch (version 2: 1 to 1024), engine, complete, logits mode
// and committed (version 2: one list per sequence), types and limits.
void parseManifestHead(const std::string& path, const nlohmann::json& manifest, CaptureManifest& out);

// Step 5, the JSON part: target present, only known roles, layers <= 1024.
// Then committed ids within the target's vocab_size when known.
void parseModels(const std::string& path, const nlohmann::json& manifest, CaptureManifest& out);

// Step 6: the calls array (at most 1,000,000 entries).
const nlohmann::json& captureCallsArray(const std::string& path, const nlohmann::json& manifest);

// Step 6 for one call: role, index (next_index[role] is the index expected
// and is advanced), input_ids, positions, positions_source, cache_position.
// Version 2: input_ids and positions are B lists of n, positions <= 2^31 - 1.
CaptureCall parseCallHead(const std::string& path, const nlohmann::json& call, size_t position,
                          const CaptureManifest& manifest, std::array<int64_t, kCaptureRoles>& next_index);

// "call 7 (drafter index 3)": how errors name a call.
std::string describeCall(size_t position, const CaptureCall& call);

// Step 7 for one state (`field` is "before" or "after"), on its own: kinds
// and layers have model.layers entries, runs are pairs with count >= 1 and
// first >= -1, empty runs only in static and ring layers, at most 2^24 slots.
// Version 2: each layer is B run lists with equal slot counts, padding runs
// (first -2) allowed, at most 2^24 slots across the batch.
std::optional<CaptureCacheState> parseCacheState(const std::string& path, const std::string& what,
                                                 const nlohmann::json& call, const char* field,
                                                 const CaptureModel& model, const CaptureManifest& manifest);

// Step 8: null for a role's first call, else a known kind, layers in range, a string what.
std::optional<CaptureBetween> parseBetween(const std::string& path, const std::string& what,
                                           const nlohmann::json& call, int64_t index, int64_t layers);

// Step 9, the JSON part: null or {"kind": "padding"|"explicit", "tensor": NAME}.
std::optional<CaptureMaskRef> parseMaskRef(const std::string& path, const std::string& what,
                                           const nlohmann::json& call);

// Step 10, the JSON part: null or {"rows" <= n, "tensors": the names of the
// mode, and in version 3 optionally "reference" (docs/capture-format-v3.md)}.
std::optional<CaptureLogitsRef> parseLogitsRef(const std::string& path, const std::string& what,
                                               const nlohmann::json& call, int64_t inputs, const CaptureManifest& manifest);

// After the last call: models[role].calls equals the calls of that role.
void checkCallCounts(const std::string& path, const CaptureManifest& manifest,
                     const std::array<int64_t, kCaptureRoles>& next_index);

}  // namespace kvscope
