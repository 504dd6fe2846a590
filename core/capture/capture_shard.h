#pragma once
// A tensor-parallel rank's capture (format version 3, docs/capture-format-v3.md):
// the manifest's `shard` names the rank, the number of ranks and, per role,
// the KV heads its rows hold. Each rank records its own file; the calls,
// inputs, positions, logits and committed tokens are the run's, the same in
// every rank's file. Torch-free.
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/capture/capture_manifest.h"

namespace kvscope {

class CaptureValidator;

// The most ranks a set may hold (a bound for hostile files, far above any
// tensor-parallel degree in use).
constexpr int64_t kMaxCaptureRanks = 1024;

// Step 5, after the models: `shard` (version 3 only), or nullopt when absent.
// rank in [0, ranks), ranks in [1, 1024], and for every role the run has one
// [first, count] with count >= 1 within the role's num_key_value_heads (when
// the config gives it). Error("<path>: shard...: <problem>") otherwise.
std::optional<CaptureShard> parseCaptureShard(const std::string& path, const nlohmann::json& manifest,
                                              const CaptureManifest& parsed);

// The KV heads each role's rows must hold: the shard's count, else the
// config's num_key_value_heads; checked against every layer's row tensor.
// A rank's rows read as the whole model's would be compared with the
// reference broadcast over the heads, so a mismatch is refused here, naming
// both shapes.
void requireRowHeads(const std::string& path, const CaptureManifest& manifest, const CaptureValidator& validator);

// What a rank's file checked alone cannot tell: another rank's broken cache
// reaches this rank's rows through the summed activations, so they show wrong
// values; only every rank's file says which rank broke first.
std::string shardAloneNote(const CaptureManifest& manifest);

// "rank 1 of 2 (target KV heads 4-7 of 8)".
std::string describeShard(const CaptureManifest& manifest);

}  // namespace kvscope
