#include "core/runtime/allocator_tuning.h"

#include <sys/mman.h>

#include <cstdint>
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

void adviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (data == nullptr || bytes < 4 * kHuge) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) / kHuge * kHuge;  // whole 2 MB pages inside the range
  const uintptr_t last = (begin + bytes) / kHuge * kHuge;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

}  // namespace kvscope
