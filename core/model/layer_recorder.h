#pragma once
// A ProbeSink that keeps the chosen probe points of one layer from one
// forward, so an inspector can read the engine's own intermediate tensors
// instead of recomputing them.
#include <cstdint>
#include <map>
#include <set>

#include <ATen/core/Tensor.h>

#include "core/model/probe.h"

namespace kvscope {

class LayerRecorder : public ProbeSink {
 public:
  LayerRecorder(int64_t layer, std::set<Probe> points) : layer_(layer), points_(std::move(points)) {}

  bool wants(Probe probe, int64_t layer) const override { return layer == layer_ && points_.count(probe) > 0; }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override;

  bool has(Probe probe) const { return recorded_.count(probe) > 0; }
  // The recorded tensor (a float32 copy; bool stays bool). Throws Error when
  // the forward did not record the point for this layer.
  const at::Tensor& get(Probe probe) const;

 private:
  int64_t layer_;
  std::set<Probe> points_;
  std::map<Probe, at::Tensor> recorded_;
};

}  // namespace kvscope
