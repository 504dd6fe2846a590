#pragma once
// Learning rate by step: linear warm-up from 0 to the peak, then cosine
// decay to min_ratio * peak at the last step.
#include <cstdint>

namespace kvscope {

struct LrSchedule {
  double peak = 3e-3;
  int64_t warmup_steps = 100;
  int64_t total_steps = 1000;
  double min_ratio = 0.1;

  // step counts from 0; the rate used for that optimizer step.
  double at(int64_t step) const;
};

}  // namespace kvscope
