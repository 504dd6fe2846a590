#pragma once
// Rotary position embeddings as Hugging Face's Llama computes them
// (rotate_half convention, float32 tables, linear and llama3 scaling, and
// Phi-3's longrope, whose factor set is chosen per call: the long factors
// when the call's largest position + 1 exceeds original_max_position_embeddings).
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/model/model_config.h"

namespace kvscope {

class Rope {
 public:
  explicit Rope(const ModelConfig& config);
  // cos, sin for the given positions: each [n, head_dim], float32.
  std::pair<at::Tensor, at::Tensor> table(const at::Tensor& positions) const;
  // The angle channel pair (i, i + head_dim / 2) turns by at each position:
  // [n, head_dim / 2] radians, float32, with the factor set table() uses for
  // the same call. table() is cos/sin of these (twice), times magnitude().
  at::Tensor angles(const at::Tensor& positions) const;
  // longrope's cos/sin scale (1 for every other rope type).
  double magnitude() const { return cos_sin_scale_; }
  // longrope: whether a call whose largest position is `last` uses the long factors.
  bool usesLongFactors(int64_t last) const { return long_inv_freq_.defined() && last + 1 > original_context_; }
  // Whether a row of table() depends on the call's other positions
  // (longrope's factor set); otherwise a table over 0 .. P - 1 holds every
  // call's rows.
  bool callDependent() const { return long_inv_freq_.defined(); }
  // x: [heads, n, head_dim]; cos/sin: [n, head_dim].
  static at::Tensor apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

 private:
  at::Tensor inv_freq_;       // [head_dim / 2], float32 (longrope: the short factors)
  at::Tensor long_inv_freq_;  // longrope only
  int64_t original_context_ = 0;
  double cos_sin_scale_ = 1.0;  // longrope: sqrt(1 + ln(max / original) / ln(original))
};

}  // namespace kvscope
