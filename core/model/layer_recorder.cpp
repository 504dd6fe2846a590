#include "core/model/layer_recorder.h"

#include <torch/types.h>

#include <string>

#include "core/error.h"

namespace kvscope {

void LayerRecorder::record(Probe probe, int64_t, const at::Tensor& value) {
  // A copy: the forward may reuse or overwrite its buffers after the call.
  recorded_[probe] = value.scalar_type() == torch::kBool ? value.clone() : value.to(torch::kFloat32, false, true);
}

const at::Tensor& LayerRecorder::get(Probe probe) const {
  const auto it = recorded_.find(probe);
  if (it == recorded_.end()) {
    throw Error("layer " + std::to_string(layer_) + ": the forward recorded no " + probeName(probe));
  }
  return it->second;
}

}  // namespace kvscope
