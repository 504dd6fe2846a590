#pragma once
// How a forward reaches its model. An engine decoding one sequence runs each
// forward as it comes (directForwards()); a batched engine hands it to a
// runner that joins the forwards of its sequences into one batched forward
// (core/decode/forward_batcher.h). Caches and sessions feed through a runner
// and never need to know which.
#include <ATen/core/Tensor.h>

#include "core/model/batch_rows.h"

namespace kvscope {

class CausalLM;

class ForwardRunner {
 public:
  virtual ~ForwardRunner() = default;
  // The logits of `forward` ([logit rows, vocab]) as CausalLM::forward (or,
  // with forward.unchecked, forwardUnchecked) gives them; throws what it throws.
  virtual at::Tensor run(const CausalLM& model, const SequenceForward& forward) = 0;
};

// Runs every forward by itself, at once.
ForwardRunner& directForwards();

}  // namespace kvscope
