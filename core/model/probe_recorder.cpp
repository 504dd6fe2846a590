#include "core/model/probe_recorder.h"

#include <algorithm>
#include <string>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

bool ProbeRecorder::wants(Probe probe, int64_t layer) const {
  return (!layer_ || layer == *layer_) && std::find(points_.begin(), points_.end(), probe) != points_.end();
}

void ProbeRecorder::record(Probe probe, int64_t layer, const at::Tensor& value) {
  auto& layers = recorded_[probe];
  if (static_cast<int64_t>(layers.size()) <= layer) layers.resize(static_cast<size_t>(layer + 1));
  layers[static_cast<size_t>(layer)] =
      value.scalar_type() == torch::kBool ? value.clone() : value.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
}

std::vector<at::Tensor> ProbeRecorder::perLayer(Probe probe) const {
  const auto it = recorded_.find(probe);
  return it == recorded_.end() ? std::vector<at::Tensor>{} : it->second;
}

bool ProbeRecorder::has(Probe probe, int64_t layer) const {
  const auto it = recorded_.find(probe);
  return it != recorded_.end() && layer >= 0 && layer < static_cast<int64_t>(it->second.size()) &&
         it->second[static_cast<size_t>(layer)].defined();
}

const at::Tensor& ProbeRecorder::get(Probe probe, int64_t layer) const {
  if (!has(probe, layer)) {
    throw Error("layer " + std::to_string(layer) + ": the forward recorded no " + probeName(probe));
  }
  return recorded_.at(probe)[static_cast<size_t>(layer)];
}

}  // namespace kvscope
