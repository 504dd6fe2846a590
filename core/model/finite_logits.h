#pragma once
// The finite-logits guard. A config that validates can still compute NaN or
// Inf (a checkpoint holding NaN weights, a norm epsilon of 0 over a zero
// row, a fault's half-precision cache overflowing), and a sampler handed NaN
// logits picks token 0 again and again without a word. So every forward
// checks its logits once (one reduction), and only when that check fails is
// the forward run again with every probe point watched, to name the layer and
// the step where the values first stopped being finite.
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "core/model/model_config.h"
#include "core/model/probe.h"

namespace kvscope {

// Whether every value of x is finite; an empty tensor is. One pass, no copy.
bool allFinite(const at::Tensor& x);

// False only when $KVSCOPE_MEASURE_NO_FINITE_GUARD is set: the guard's cost is
// measured by running the same benchmark with and without it
// (docs/hostile-inputs.md). Not a setting: with it, NaN logits go unnoticed.
bool finiteGuardEnabled();

// A ProbeSink that watches every point of every layer and keeps the first
// (in the forward's order) whose value holds NaN or Inf.
class FirstNonFinite : public ProbeSink {
 public:
  bool wants(Probe, int64_t) const override { return !found_; }
  void record(Probe point, int64_t layer, const at::Tensor& value) override;

  bool found() const { return found_; }
  Probe point() const { return point_; }
  int64_t layer() const { return layer_; }

 private:
  bool found_ = false;
  Probe point_ = Probe::LayerInput;
  int64_t layer_ = -1;
};

// What the error says after the search: where the values first became
// non-finite ("layer 0, the query after RoPE"; after the last layer when no
// probe point was) and the config fields and weights that step depends on.
// stale_cache: the cache rows that step read were already non-finite before
// this forward (an earlier forward wrote them).
std::string describeNonFinite(const ModelConfig& config, const FirstNonFinite& site, bool stale_cache);

}  // namespace kvscope
