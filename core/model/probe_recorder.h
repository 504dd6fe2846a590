#pragma once
// A ProbeSink that keeps copies of the chosen probe points of one forward,
// of every layer or of one: what the explainer reads instead of recomputing
// the engine's intermediate tensors, what the compression policies score with
// (attention weights, queries), what the lab compares (attention outputs),
// and the fresh K and V the audit and a capture's check compare rows with.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/probe.h"

namespace kvscope {

class ProbeRecorder : public ProbeSink {
 public:
  // `points` of every layer.
  explicit ProbeRecorder(std::vector<Probe> points) : points_(std::move(points)) {}
  // `points` of `layer` only.
  ProbeRecorder(int64_t layer, std::vector<Probe> points) : points_(std::move(points)), layer_(layer) {}

  bool wants(Probe probe, int64_t layer) const override;
  // Keeps a float32 copy (bool stays bool): the forward may reuse or
  // overwrite its buffers after the call.
  void record(Probe probe, int64_t layer, const at::Tensor& value) override;

  // One tensor per layer up to the last one recorded (undefined where a
  // layer recorded nothing); empty when the point was not recorded.
  std::vector<at::Tensor> perLayer(Probe probe) const;
  bool has(Probe probe, int64_t layer) const;
  // The recorded tensor; throws Error when the forward did not record the
  // point for this layer.
  const at::Tensor& get(Probe probe, int64_t layer) const;

 private:
  std::vector<Probe> points_;
  std::optional<int64_t> layer_;                         // nullopt: every layer
  std::map<Probe, std::vector<at::Tensor>> recorded_;  // per point, per layer
};

}  // namespace kvscope
