#include "core/model/all_layers_recorder.h"

#include <algorithm>

#include <torch/types.h>

namespace kvscope {

bool AllLayersRecorder::wants(Probe probe, int64_t) const {
  return std::find(points_.begin(), points_.end(), probe) != points_.end();
}

void AllLayersRecorder::record(Probe probe, int64_t layer, const at::Tensor& value) {
  auto it = std::find_if(recorded_.begin(), recorded_.end(), [&](const auto& entry) { return entry.first == probe; });
  if (it == recorded_.end()) it = recorded_.insert(recorded_.end(), {probe, {}});
  auto& layers = it->second;
  if (static_cast<int64_t>(layers.size()) <= layer) layers.resize(static_cast<size_t>(layer + 1));
  layers[static_cast<size_t>(layer)] = value.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
}

std::vector<at::Tensor> AllLayersRecorder::perLayer(Probe probe) const {
  for (const auto& [point, layers] : recorded_) {
    if (point == probe) return layers;
  }
  return {};
}

}  // namespace kvscope
