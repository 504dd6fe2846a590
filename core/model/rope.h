#pragma once
// Rotary position embeddings as Hugging Face's Llama computes them
// (rotate_half convention, float32 tables, linear and llama3 scaling).
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/model/model_config.h"

namespace kvscope {

class Rope {
 public:
  explicit Rope(const ModelConfig& config);
  // cos, sin for the given positions: each [n, head_dim], float32.
  std::pair<at::Tensor, at::Tensor> table(const at::Tensor& positions) const;
  // x: [heads, n, head_dim]; cos/sin: [n, head_dim].
  static at::Tensor apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

 private:
  at::Tensor inv_freq_;  // [head_dim / 2], float32
};

}  // namespace kvscope
