#include "core/model/row_kernels.h"

#include <cmath>

namespace kvscope {

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
