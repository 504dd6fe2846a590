#pragma once
// How logits become the next token: greedy, or sampled after temperature,
// top-k and top-p (core/decode/sampling.h applies them). Plain data, so that
// session options can be declared without libtorch.
#include <cstdint>
#include <string>

namespace kvscope {

struct SamplingSettings {
  bool greedy = true;
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // in (0, 1]; 1: off

  // Throws Error naming the bad parameter.
  void validate() const;
  std::string describe() const;
};

}  // namespace kvscope
