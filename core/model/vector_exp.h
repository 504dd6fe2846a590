#pragma once
// expf over 16 float32 lanes (AVX-512) from glibc's libmvec, within 1 ulp
// like glibc's scalar expf. Declared here because <math.h> declares the
// vector variants only under -ffast-math; kvscope_core links libmvec
// (core/CMakeLists.txt). Callers must run only where the CPU has AVX-512F.
#include <immintrin.h>

extern "C" __m512 _ZGVeN16v_expf(__m512);

namespace kvscope {

__attribute__((target("avx512f"), always_inline)) inline __m512 exp16(__m512 x) { return _ZGVeN16v_expf(x); }

}  // namespace kvscope
