#include "core/model/row_kernels.h"

#include <immintrin.h>

#include <cmath>

#include "core/model/vector_exp.h"
#include "core/runtime/cpu_features.h"

// GCC 12 reports the intrinsics' own _mm512_undefined_ps() as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvscope {
namespace {

// SiLU(gate) * up, 16 at a time, the last vector masked, so every element
// takes the same path whatever count is (a verify row gives what a decode
// step gives). A scalar exp per element cost a 5-row verify of the bundled
// target a tenth of its time (perf, 2026-11-28).
__attribute__((target("avx512f"))) void siluTimesUpAvx512(const float* gate, const float* up, float* out,
                                                           int64_t count) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(lanes, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(lanes, up + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));  // exp(-g)
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
  }
}

}  // namespace

void rmsNormRows(const float* x, float* out, int64_t rows, int64_t width, int64_t stride, const float* gain,
                 double eps, NormGain kind) {
  const float epsilon = static_cast<float>(eps);  // ATen adds the double scalar in float32
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * stride;
    float* dst = out + r * stride;
    float squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t c = 0; c < width; ++c) squares += row[c] * row[c];
    const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(width) + epsilon);  // rsqrt(mean + eps)
    if (kind == NormGain::OffsetFromOne) {
      for (int64_t c = 0; c < width; ++c) dst[c] = (row[c] * inverse) * (1.0f + gain[c]);
    } else {
      for (int64_t c = 0; c < width; ++c) dst[c] = gain[c] * (row[c] * inverse);
    }
  }
}

void rotateHeadsInPlace(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* head = x + h * head_dim;
    for (int64_t d = 0; d < half; ++d) {
      const float x1 = head[d], x2 = head[d + half];
      // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]; two
      // products rounded, then their sum, as the tensor expression does.
      const float low_product = x1 * cos[d], low_rotated = -x2 * sin[d];
      const float high_product = x2 * cos[d + half], high_rotated = x1 * sin[d + half];
      head[d] = low_product + low_rotated;
      head[d + half] = high_product + high_rotated;
    }
  }
}

void gatedActivation(const float* gate, const float* up, float* out, int64_t count, bool gelu_tanh) {
  if (gelu_tanh) {
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    constexpr float kKappa = 0.044715f;
    for (int64_t i = 0; i < count; ++i) {
      const float g = gate[i];
      out[i] = 0.5f * g * (1.0f + std::tanh(kBeta * (g + kKappa * g * g * g))) * up[i];
    }
    return;
  }
  if (cpuHasAvx512()) return siluTimesUpAvx512(gate, up, out, count);
  for (int64_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void addInPlace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void addBiasRows(float* y, const float* bias, int64_t rows, int64_t width, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) addInPlace(y + r * stride, bias, width);
}

void softcapInPlace(float* x, int64_t count, double cap) {
  const float c = static_cast<float>(cap);
  for (int64_t i = 0; i < count; ++i) x[i] = std::tanh(x[i] / c) * c;
}

}  // namespace kvscope
