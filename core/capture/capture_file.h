#pragma once
// A .kvcapture file (docs/capture-format.md): the manifest as plain structs
// and the tensors as raw bytes, every check of the spec's section 7 done
// before open() returns. Torch-free: the core turns the bytes into tensors.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/capture/capture_manifest.h"
#include "core/capture/capture_validator.h"
#include "core/model/safetensors.h"

namespace kvscope {

enum class CaptureKV { Keys, Values };

// A tensor of the capture, viewed in place (little-endian, row-major).
struct CaptureTensor {
  const StTensorInfo* info = nullptr;
  const uint8_t* data = nullptr;
  StDType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
  size_t nbytes() const { return static_cast<size_t>(info->end - info->begin); }
};

class CaptureFile {
 public:
  // Reads and validates the file; throws Error("<path>: <problem>") at the
  // first check that fails, in the spec's order.
  static std::shared_ptr<const CaptureFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const CaptureManifest& manifest() const { return manifest_; }

  // A tensor the manifest names (a mask, logits); Error when absent.
  CaptureTensor tensor(const std::string& name) const;
  // The row tensors [kv_heads, n_rows, head_dim] of a role's layer.
  CaptureTensor rows(CaptureRole role, int64_t layer, CaptureKV part) const;
  int64_t rowCount(CaptureRole role, int64_t layer) const;
  // Rows first .. first + count - 1 of a role's layer as float32
  // [kv_heads, count, head_dim], converted from F16 / BF16 when stored so.
  std::vector<float> rowsFloat32(CaptureRole role, int64_t layer, CaptureKV part, int64_t first, int64_t count) const;

  // The sequences the capture holds (B of a batch, 1 otherwise).
  int64_t sequences() const { return manifest_.batch; }
  // Sequence `sequence` as a capture of that sequence alone, sharing this
  // file's tensors (capture_sequence.h); this capture itself for version 1.
  // Throws Error for what a one-sequence view cannot hold yet.
  std::shared_ptr<const CaptureFile> sequence(int64_t sequence) const;
  // Which sequence of the file this capture is (0 for the file itself).
  int64_t sequenceIndex() const { return sequence_index_; }

 private:
  CaptureFile(std::shared_ptr<const SafetensorsFile> file);
  const CaptureRowTensors& rowTensors(CaptureRole role, int64_t layer) const;

  std::shared_ptr<const SafetensorsFile> file_;
  CaptureManifest manifest_;
  std::vector<CaptureRowTensors> rows_[kCaptureRoles];
  std::map<std::string, StTensorInfo> slices_;  // a sequence's tensors: slices of the file's
  int64_t sequence_index_ = 0;
};

}  // namespace kvscope
