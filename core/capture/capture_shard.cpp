#include "core/capture/capture_shard.h"

#include <nlohmann/json.hpp>

#include "core/capture/capture_limits.h"
#include "core/capture/capture_validator.h"
#include "core/error.h"
#include "core/model/json_fields.h"

namespace kvscope {
namespace {

using Json = nlohmann::json;

const Json& field(const std::string& path, const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path, std::string("shard has no field '") + key + "'");
  return *it;
}

// The role's KV heads as the config gives them (nullopt when null).
std::optional<int64_t> configKvHeads(const CaptureManifest& manifest, CaptureRole role) {
  const CaptureModel* model = manifest.model(role);
  return model ? model->config.num_key_value_heads : std::nullopt;
}

void parseHeadRange(const std::string& path, const Json& range, CaptureRole role, const CaptureManifest& parsed,
                    CaptureShard& out) {
  const std::string what = std::string("shard.kv_heads.") + captureRoleName(role);
  if (!range.is_array() || range.size() != 2)
    fail(path, what + " must be a pair [first, count], got " + jsonSnippet(range));
  const int64_t whole = configKvHeads(parsed, role).value_or(capture_limits::kMaxKvHeads);
  const int64_t first = jsonInteger(range[0], path, what + " first", 0, whole - 1);
  const int64_t count = jsonInteger(range[1], path, what + " count", 1, whole - first);
  out.kv_head_first[static_cast<size_t>(role)] = first;
  out.kv_head_count[static_cast<size_t>(role)] = count;
}

}  // namespace

std::optional<CaptureShard> parseCaptureShard(const std::string& path, const Json& manifest,
                                              const CaptureManifest& parsed) {
  const auto it = manifest.find("shard");
  if (it == manifest.end() || it->is_null()) return std::nullopt;
  if (parsed.version < 3)
    fail(path, "shard is a version 3 field; this file is version " + std::to_string(parsed.version));
  const Json& shard = *it;
  if (!shard.is_object()) fail(path, "shard must be an object, got " + jsonSnippet(shard));
  CaptureShard out;
  out.ranks = jsonInteger(field(path, shard, "ranks"), path, "shard.ranks", 1, kMaxCaptureRanks);
  out.rank = jsonInteger(field(path, shard, "rank"), path, "shard.rank", 0, out.ranks - 1);
  const Json& heads = field(path, shard, "kv_heads");
  if (!heads.is_object()) fail(path, "shard.kv_heads must be an object, got " + jsonSnippet(heads));
  for (auto entry = heads.begin(); entry != heads.end(); ++entry) {
    const std::string& name = entry.key();
    const CaptureRole role = name == "target" ? CaptureRole::Target : CaptureRole::Drafter;
    if ((name != "target" && name != "drafter") || !parsed.model(role))
      fail(path, "shard.kv_heads names '" + name.substr(0, 60) + "', which is no role of the capture's models");
    parseHeadRange(path, entry.value(), role, parsed, out);
  }
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (parsed.models[r] && out.kv_head_count[static_cast<size_t>(r)] == 0)
      fail(path, std::string("shard.kv_heads has no entry for the ") + captureRoleName(static_cast<CaptureRole>(r)));
  }
  return out;
}

void requireRowHeads(const std::string& path, const CaptureManifest& manifest, const CaptureValidator& validator) {
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto& model = manifest.models[r];
    if (!model) continue;
    const auto role = static_cast<CaptureRole>(r);
    const std::optional<int64_t> whole = model->config.num_key_value_heads;
    const std::optional<int64_t> expected =
        manifest.shard ? std::optional<int64_t>(manifest.shard->kv_head_count[static_cast<size_t>(r)]) : whole;
    if (!expected) continue;
    for (int64_t layer = 0; layer < model->layers; ++layer) {
      const int64_t held = validator.rowTensors(role, layer).kv_heads();
      if (held == *expected) continue;
      const std::string rows = std::string(captureRoleName(role)) + " layer " + std::to_string(layer) + "'s rows hold " +
                               std::to_string(held) + " KV head" + (held == 1 ? "" : "s");
      if (manifest.shard) fail(path, rows + " but shard.kv_heads gives this rank " + std::to_string(*expected));
      fail(path, rows + " but models." + captureRoleName(role) + ".config.num_key_value_heads is " +
                     std::to_string(*expected) +
                     ": a tensor-parallel rank's rows? Record each rank with its shard (docs/engine-captures.md) "
                     "and check the ranks' files together");
    }
  }
}

std::string shardAloneNote(const CaptureManifest& manifest) {
  return describeShard(manifest) + " was checked alone: a breach in another rank's cache reaches these rows through "
         "the activations the ranks sum, and shows here as wrong values; check every rank's capture together to name "
         "the rank that broke first";
}

std::string describeShard(const CaptureManifest& manifest) {
  if (!manifest.shard) return "";
  const CaptureShard& s = *manifest.shard;
  std::string out = "rank " + std::to_string(s.rank) + " of " + std::to_string(s.ranks) + " (";
  bool first_role = true;
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto& model = manifest.models[r];
    const auto i = static_cast<size_t>(r);
    if (!model || s.kv_head_count[i] == 0) continue;
    out += (first_role ? "" : ", ") + std::string(captureRoleName(model->role)) + " KV heads " +
           std::to_string(s.kv_head_first[i]) + "-" + std::to_string(s.kv_head_first[i] + s.kv_head_count[i] - 1);
    if (model->config.num_key_value_heads) out += " of " + std::to_string(*model->config.num_key_value_heads);
    first_role = false;
  }
  return out + ")";
}

}  // namespace kvscope
