#pragma once
// Checks a .kvcapture manifest against its tensor table (docs/capture-format.md,
// section 7, steps 5 and 7-11): every tensor the manifest names exists with
// the dtype and shape its use requires, every row id is inside its layer's
// tensors and appears once per layer of a state, and every tensor of the
// file is referenced exactly once. Errors: Error("<path>: <where>: <problem>").
// Torch-free.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/capture/capture_manifest.h"
#include "core/model/safetensors.h"

namespace kvscope {

// The key and value tensors of one role and layer, [kv_heads, n_rows, head_dim].
struct CaptureRowTensors {
  const StTensorInfo* keys = nullptr;
  const StTensorInfo* values = nullptr;
  int64_t kv_heads() const { return keys->shape[0]; }
  int64_t rows() const { return keys->shape[1]; }
  int64_t head_dim() const { return keys->shape[2]; }
};

class CaptureValidator {
 public:
  // version 2 (batched): masks and logits have a leading batch axis of `batch`.
  CaptureValidator(std::string path, const SafetensorsFile& file, int64_t version = 1, int64_t batch = 1);

  // Step 5: both row tensors of every layer, dtypes F32/F16/BF16, equal
  // shapes [kv_heads <= 1024, n_rows <= 2^24, head_dim <= 4096].
  void checkModelTensors(const CaptureModel& model);
  // Step 7: row ids inside n_rows of the role's layer, none twice in a layer
  // (across every sequence of a batch: a row belongs to one sequence).
  void checkState(const std::string& what, CaptureRole role, const CaptureCacheState& state);
  // Step 9: BOOL [n, K] (explicit) or [1, K] (padding), K the call's key slots;
  // version 2: [B, n, K] or [B, K].
  void checkMask(const std::string& what, const CaptureCall& call);
  // Step 10: the logits tensors of the mode, with the same width V for every
  // call of a role, top ids in [0, vocab_size) (in [0, 2^24) when the
  // vocab_size is unknown); version 2: with a leading batch axis.
  void checkLogits(const std::string& what, const CaptureCall& call, const CaptureManifest& manifest);
  // A call's reference logits (version 3): F32, the logits' leading axes and `width` full rows.
  void checkReferenceLogits(const std::string& use, const CaptureLogitsRef& ref, const std::vector<int64_t>& lead,
                            int64_t width);
  // Step 11: no tensor of the file left unreferenced.
  void checkEveryTensorReferenced() const;

  const CaptureRowTensors& rowTensors(CaptureRole role, int64_t layer) const;

 private:
  // The tensor `name`, which must exist and not have been referenced before;
  // marks it referenced. `use` says what the manifest wanted it for.
  const StTensorInfo& reference(const std::string& name, const std::string& use);
  void requireDType(const StTensorInfo& info, const std::string& use, StDType dtype) const;
  void requireShape(const StTensorInfo& info, const std::string& use, const std::vector<int64_t>& shape) const;
  // The number of key slots a call's mask covers (section 4).
  int64_t maskKeySlots(const std::string& what, const CaptureCall& call) const;
  // Every id in [0, vocab); `known`: vocab is the model's vocab_size (else the format's largest).
  void checkTopIdsInVocab(const std::string& what, const StTensorInfo& ids, int64_t vocab, bool known) const;

  // The leading axes of a call's logits tensors: {rows}, or {B, rows} for version 2.
  std::vector<int64_t> logitsLead(int64_t rows) const;

  std::string path_;
  const SafetensorsFile& file_;
  bool batched_ = false;  // version 2
  int64_t batch_ = 1;
  std::vector<bool> referenced_;  // per tensor, in file_.tensors() order
  std::array<std::vector<CaptureRowTensors>, kCaptureRoles> rows_;
  std::array<int64_t, kCaptureRoles> logits_width_{0, 0};  // 0 until the role's first full logits
};

}  // namespace kvscope
