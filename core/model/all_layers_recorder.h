#pragma once
// A ProbeSink that keeps the chosen probe points of every layer from one
// forward (LayerRecorder keeps one layer's): what the compression policies
// score with (attention weights, queries) and what the lab compares
// (attention outputs).
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/probe.h"

namespace kvscope {

class AllLayersRecorder : public ProbeSink {
 public:
  explicit AllLayersRecorder(std::vector<Probe> points) : points_(std::move(points)) {}
  bool wants(Probe probe, int64_t layer) const override;
  // Keeps a float32 copy: the forward may reuse its buffers after the call.
  void record(Probe probe, int64_t layer, const at::Tensor& value) override;
  // One tensor per layer; empty when the point was not asked for.
  std::vector<at::Tensor> perLayer(Probe probe) const;

 private:
  std::vector<Probe> points_;
  std::vector<std::pair<Probe, std::vector<at::Tensor>>> recorded_;  // per point, per layer
};

}  // namespace kvscope
