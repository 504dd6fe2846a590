// keepTensorMemoryForReuse (core/runtime/allocator_tuning.h): after it, blocks
// the size of a forward's intermediates come from the heap, not from fresh
// mappings, and the user's own malloc settings are left alone.
#include <gtest/gtest.h>

#include <cstdlib>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/runtime/allocator_tuning.h"

namespace kvscope {
namespace {

#ifdef __GLIBC__
// Chunks malloc currently holds as mappings of their own.
size_t mappedChunks() { return mallinfo2().hblks; }

// Kept where the compiler cannot see it unused (it may drop a malloc/free pair).
void* volatile kept = nullptr;

TEST(AllocatorTuning, IntermediatesComeFromTheHeapAndHugeBlocksStillMapped) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer replaces glibc's malloc, and its mallopt changes nothing";
#endif
  ASSERT_TRUE(keepTensorMemoryForReuse());
  const size_t before = mappedChunks();
  // Without the tuning a fresh process maps this block (glibc starts at 128 KB).
  kept = std::malloc(8 << 20);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(mappedChunks(), before);
  std::free(kept);
  kept = std::malloc(64 << 20);  // over glibc's 32 MB ceiling
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(mappedChunks(), before + 1);
  std::free(kept);
}

TEST(AllocatorTuning, LeavesTheUsersMallocSettingsAlone) {
  ASSERT_EQ(setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1), 0);
  EXPECT_FALSE(keepTensorMemoryForReuse());
  unsetenv("MALLOC_TRIM_THRESHOLD_");
}
#endif

}  // namespace
}  // namespace kvscope
