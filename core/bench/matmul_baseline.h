#pragma once
// A bare libtorch baseline of a model's matrix products: the same weights,
// multiplied in the same order by one row (a decode step) or many (a prefill),
// with nothing else (no norms, attention, cache or sampling). Our forward's
// time over this one says what the rest of the engine costs; the one-row pass
// reads every fp32 weight once, so it is also the memory-bandwidth bound of a
// decode step. Weights stored as panels (core/model/dense.h) are copied to
// row-major here, libtorch's own layout: the baseline doubles their memory.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/model/causal_lm.h"

namespace kvscope {

class MatmulBaseline {
 public:
  explicit MatmulBaseline(const CausalLM& model);
  // Makes the inputs of run(rows) (random, [rows, in] per width) so that
  // run() times only the products.
  void prepare(int64_t rows) const;
  // x [rows, in] through every weight: torch::mv for one row, torch::mm otherwise.
  void run(int64_t rows) const;
  double weightBytes() const { return bytes_; }
  int64_t matrices() const { return static_cast<int64_t>(weights_.size()); }

 private:
  const at::Tensor& inputFor(int64_t in, int64_t rows) const;
  std::vector<at::Tensor> weights_;  // each [out, in] (GPT-2's Conv1D weights as transposed views)
  double bytes_ = 0;
  mutable std::map<std::pair<int64_t, int64_t>, at::Tensor> inputs_;  // (in, rows) -> [rows, in]
};

}  // namespace kvscope
