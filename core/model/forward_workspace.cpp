#include "core/model/forward_workspace.h"

#include <algorithm>

#include <torch/torch.h>

namespace kvscope {

void ForwardWorkspace::reserve(int64_t rows) {
  if (rows <= rows_) return;
  // Twice what was asked, at least 8 rows: a verify pass after decode steps
  // grows it once, not once per extra row.
  const int64_t capacity = std::max<int64_t>({rows, 2 * rows_, 8});
  auto make = [&](int64_t width) { return at::empty({capacity, width}, at::TensorOptions().dtype(at::kFloat)); };
  residual_ = make(shape_.hidden);
  normed_ = make(shape_.hidden);
  projected_ = make(shape_.hidden);
  qkv_ = make(shape_.qkv);
  merged_ = make(shape_.attention);
  gate_up_ = make(2 * shape_.intermediate);
  activated_ = make(shape_.intermediate);
  cos_ = make(shape_.rotary);
  sin_ = make(shape_.rotary);
  rows_ = capacity;
}

void ForwardWorkspace::setRotaryTable(at::Tensor cos, at::Tensor sin) {
  rotary_cos_ = cos.to(at::kFloat).contiguous();
  rotary_sin_ = sin.to(at::kFloat).contiguous();
}

ForwardWorkspace::Lease::Lease(std::unique_ptr<ForwardWorkspace>& shared, std::mutex& mutex,
                               const WorkspaceShape& shape)
    : lock_(mutex, std::try_to_lock) {
  if (lock_.owns_lock()) {
    if (!shared) shared = std::make_unique<ForwardWorkspace>(shape);
    workspace_ = shared.get();
  } else {
    own_ = std::make_unique<ForwardWorkspace>(shape);
    workspace_ = own_.get();
  }
}

}  // namespace kvscope
