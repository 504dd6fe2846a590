#pragma once
// The weights of a Hugging Face model directory: model.safetensors, or the
// shards listed by model.safetensors.index.json. Tensors are read from the
// memory-mapped files and converted (F32/F16/BF16 storage) to the compute
// dtype on request.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include "core/model/safetensors.h"

namespace kvscope {

class Checkpoint {
 public:
  // Throws Error when the directory has neither model.safetensors nor an
  // index, or when any file fails validation.
  static Checkpoint open(const std::string& dir);

  const std::string& directory() const { return dir_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;
  const StTensorInfo& info(const std::string& name) const;
  const std::string& fileOf(const std::string& name) const;
  // A copy of the tensor in `options` (dtype, device). Throws Error naming
  // the file and tensor when it is missing. inference_layout: a 2-D weight
  // [out, in] is stored as packForInference (core/model/dense.h) would store
  // it, converted and laid out in one pass, so no second full-size copy exists.
  at::Tensor load(const std::string& name, const c10::TensorOptions& options, bool inference_layout = false) const;
  // The same 2-D weight converted into `panels` ([out / 16, in, 16], its
  // dtype the compute dtype), a slice of a larger tensor the caller owns.
  // Throws Error naming the tensor when its stored shape does not fit.
  void loadInto(const std::string& name, at::Tensor& panels) const;

 private:
  // The file holding `name`, after refusing a non-floating tensor where
  // `options` asks for floating weights.
  const SafetensorsFile& floatingTensor(const std::string& name, const c10::TensorOptions& options) const;

  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

// Converts one stored tensor to a torch tensor (copied, owning its memory).
at::Tensor toTensor(const SafetensorsFile& file, const StTensorInfo& info, const c10::TensorOptions& options,
                    bool inference_layout = false);
// Converts one stored 2-D tensor [out, in] into `panels` [out / 16, in, 16].
void toPanels(const SafetensorsFile& file, const StTensorInfo& info, at::Tensor& panels);

// Writes torch tensors as a safetensors file (atomically), storing each in
// `storage` dtype (F32, F16 or BF16 for floating tensors; integer tensors
// keep their dtype).
void saveTensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                 const std::map<std::string, std::string>& metadata, StDType storage = StDType::F32);

}  // namespace kvscope
