#pragma once
// How fast this machine reads a block of memory the size of a model's stored
// weights, with the threads the forward uses: a decode step reads every weight
// once, so no step can take less than one such pass. Our step's time over it
// says how close the forward is to the memory it must stream (the bundled
// target's 9.5 MB sit in L3 here; the 0.5 B shape's 1 GB comes from DRAM).
#include <cstdint>

#include "core/bench/timing.h"

namespace kvscope {

struct ReadBound {
  Timing pass;             // one read of every byte
  double gb_per_s = 0;     // bytes / the median pass
};

ReadBound measureReadBound(int64_t bytes, const TrialPlan& plan);

}  // namespace kvscope
