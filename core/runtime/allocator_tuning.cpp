#include "core/runtime/allocator_tuning.h"

#include <cstdlib>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace kvscope {

bool keepTensorMemoryForReuse() {
#ifdef __GLIBC__
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return false;
  constexpr int kMmapThreshold = 32 << 20;   // glibc refuses more on 64-bit
  constexpr int kTrimThreshold = 256 << 20;  // freed memory kept before the heap shrinks
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace kvscope
