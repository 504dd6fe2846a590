#include "core/bench/multiply_add_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/model/dense.h"
#include "core/runtime/cpu_features.h"

namespace kvscope {
namespace {

// Enough independent chains to cover an FMA's latency on every unit (4-5
// cycles x 2 units); each chain keeps a value near 1 so it never overflows.
constexpr int kChains = 12;
constexpr int64_t kIterations = 1 << 18;

// Seconds for kIterations x kChains 512-bit multiply-adds.
__attribute__((target("avx512f"))) double chains512() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(c));
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-6f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], scale, shift);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  volatile float keep = _mm512_reduce_add_ps(sum);  // the chains' results are used: not optimised away
  (void)keep;
  return seconds;
}

__attribute__((target("avx2,fma"))) double chains256() {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(c));
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-6f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], scale, shift);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  alignas(32) float lanes[8];
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  _mm256_store_ps(lanes, sum);
  volatile float keep = lanes[0];
  (void)keep;
  return seconds;
}

}  // namespace

double multiplyAddPeakPerSecond() {
  const bool wide = cpuHasAvx512();
  if (!wide && !cpuHasAvx2Fma()) return 0.0;
  const double per_run = static_cast<double>(kIterations) * kChains * (wide ? 16 : 8);
  std::vector<double> seconds;
  for (int run = 0; run < 6; ++run) seconds.push_back(wide ? chains512() : chains256());
  seconds.erase(seconds.begin());  // the first wakes the unit (and the clock) up
  std::nth_element(seconds.begin(), seconds.begin() + 2, seconds.end());
  return per_run / seconds[2];
}

int64_t matrixMultiplyAddsPerRow(const CausalLM& model) {
  const ModelConfig& config = model.config();
  int64_t total = 0;
  for (const auto& [name, tensor] : model.namedParameters()) {
    const bool lookup = name.find("embed_tokens") != std::string::npos || name.find("wte") != std::string::npos ||
                        name.find("wpe") != std::string::npos;
    if (tensor.dim() < 2 || lookup) continue;
    const std::vector<int64_t> shape = denseShape(tensor);
    total += shape[0] * shape[1];
  }
  // A tied head is the embedding matrix, listed once under the embedding's name.
  if (config.tie_word_embeddings) total += config.vocab_size * config.hidden_size;
  return total;
}

}  // namespace kvscope
