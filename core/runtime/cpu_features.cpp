#include "core/runtime/cpu_features.h"

namespace kvscope {

// __builtin_cpu_supports takes string literals only, hence one test per
// feature set. __builtin_cpu_init first: these may run before the
// constructors that set the CPU model up.
#if defined(__x86_64__) || defined(__i386__)

bool cpuHasAvx512() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"));
  return has;
}

bool cpuHasAvx2Fma() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  return has;
}

bool cpuHasAvx2FmaF16c() {
  static const bool has = cpuHasAvx2Fma() && __builtin_cpu_supports("f16c");
  return has;
}

#else

bool cpuHasAvx512() { return false; }
bool cpuHasAvx2Fma() { return false; }
bool cpuHasAvx2FmaF16c() { return false; }

#endif

}  // namespace kvscope
