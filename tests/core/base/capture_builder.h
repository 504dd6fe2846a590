#pragma once
// Hand-built captures for the reader's tests: a manifest, its metadata and
// its tensors written as one .kvcapture (docs/capture-format.md), so a test
// can break one field at a time and save again.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/safetensors.h"

namespace kvscope::capture_builder {

struct CaptureTensor {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// F32 [shape] of a repeating pattern of values in [-1, 2].
inline CaptureTensor floats(const std::string& name, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  std::string bytes(static_cast<size_t>(count) * 4, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const float value = 0.25f * static_cast<float>(i % 13) - 1.0f;
    std::memcpy(bytes.data() + 4 * i, &value, 4);
  }
  return {name, StDType::F32, std::move(shape), std::move(bytes)};
}

// BOOL [rows, columns].
inline CaptureTensor mask(const std::string& name, const std::vector<std::vector<uint8_t>>& rows) {
  std::string bytes;
  for (const auto& row : rows) bytes.append(row.begin(), row.end());
  return {name, StDType::BOOL, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.front().size())}, bytes};
}

// Writes `manifest` (as __metadata__.kvscope_capture beside `metadata`) and `tensors` to `path`.
inline void writeCapture(const std::string& path, const nlohmann::json& manifest,
                         std::map<std::string, std::string> metadata, const std::vector<CaptureTensor>& tensors) {
  metadata["kvscope_capture"] = manifest.dump();
  std::vector<StWriteTensor> out;
  for (const auto& t : tensors) out.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  writeSafetensors(path, out, metadata);
}

}  // namespace kvscope::capture_builder
