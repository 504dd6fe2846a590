#include "core/bench/read_bound.h"

#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace kvscope {

namespace {
// Where the pass's result goes, so the compiler cannot drop the reads.
std::atomic<uint64_t> g_read_sink{0};
constexpr int64_t kGrain = 1 << 15;  // 256 KB of words per task

// XOR of 64-bit words with four independent vector accumulators: one load
// per vector and nothing to wait on, so the loop runs at the speed memory
// delivers. (A plain loop, vectorised for SSE2 only, read L2 at 15 GB/s here
// where these read it at 62-66 GB/s: it measured itself, not memory.)
#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t xorWords512(const uint64_t* d, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(d + i));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(d + i + 8));
    a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(d + i + 16));
    a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(d + i + 24));
  }
  uint64_t acc = static_cast<uint64_t>(_mm512_reduce_or_epi64(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3))));
  for (; i < n; ++i) acc ^= d[i];
  return acc;
}

__attribute__((target("avx2"))) uint64_t xorWords256(const uint64_t* d, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i + 4)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i + 8)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
  uint64_t acc = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
  for (; i < n; ++i) acc ^= d[i];
  return acc;
}
#endif

uint64_t xorWords(const uint64_t* d, int64_t n) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return xorWords512(d, n);
  if (avx2) return xorWords256(d, n);
#endif
  uint64_t acc = 0;
  for (int64_t i = 0; i < n; ++i) acc ^= d[i];
  return acc;
}
}  // namespace

ReadBound measureReadBound(int64_t bytes, const TrialPlan& plan) {
  require(bytes > 0, "read bound: nothing to read");
  std::vector<uint64_t> words(static_cast<size_t>((bytes + 7) / 8));
  std::iota(words.begin(), words.end(), uint64_t{1});
  const int64_t n = static_cast<int64_t>(words.size());
  const uint64_t* data = words.data();
  ReadBound bound;
  bound.pass = timeTrials(
      [&] {
        std::atomic<uint64_t> total{0};
        at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
          total.fetch_xor(xorWords(data + begin, end - begin), std::memory_order_relaxed);
        });
        g_read_sink.fetch_xor(total.load(), std::memory_order_relaxed);
      },
      plan);
  bound.gb_per_s = static_cast<double>(bytes) / 1e9 / (bound.pass.median_ms / 1000.0);
  return bound;
}

}  // namespace kvscope
