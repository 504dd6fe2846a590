#pragma once
// The element-wise steps of a decoder layer as small loops over float32 rows,
// written into buffers the caller owns: the lean forward's counterparts of
// the ATen expressions in llama_model.cpp (docs/performance.md, "How the
// speed is reached"). A decode step of a small model makes a few dozen such
// steps per layer, each a few hundred floats; as ATen operations each cost a
// dispatch and an allocation (2-5 us), more than the arithmetic.
//
// Which are bit for bit the ATen expression's: the rotary embedding, the
// residual add, the bias add, the gains of a norm (the same float operations
// in the same order, no fused multiply-add). Which are not: the sum of
// squares of RMSNorm (ATen's reduction adds in another order) and the
// activations (ATen's vectorised exp and tanh round differently in the last
// place); both stay within a few float32 ulps.
#include <cstdint>

namespace kvscope {

// How a norm applies its gain: Llama's gain * normed, or Gemma 2's
// normed * (1 + gain), scaled in float32.
enum class NormGain { Scale, OffsetFromOne };

// out[r] = rmsnorm(x[r]) with `gain` [width], for `rows` rows of `width`
// floats, x and out `stride` floats apart (out may be x). The sum of squares
// accumulates in float32, as the ATen expression's mean does.
void rmsNormRows(const float* x, float* out, int64_t rows, int64_t width, int64_t stride, const float* gain,
                 double eps, NormGain kind);

// Rotates `heads` heads of head_dim floats in place (rotate_half convention):
// x = x * cos + rotate_half(x) * sin, with cos and sin [head_dim] of the row's
// position. Heads are head_dim floats apart.
void rotateHeadsInPlace(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin);

// out[i] = act(gate[i]) * up[i] for i < count: SiLU, or GELU's tanh form
// (gelu_pytorch_tanh) when `gelu_tanh`.
void gatedActivation(const float* gate, const float* up, float* out, int64_t count, bool gelu_tanh);

// x[i] += y[i] for i < count.
void addInPlace(float* x, const float* y, int64_t count);

// y[r][c] += bias[c] for `rows` rows of `width` floats, `stride` floats apart.
void addBiasRows(float* y, const float* bias, int64_t rows, int64_t width, int64_t stride);

// x[i] = cap * tanh(x[i] / cap) for i < count (Gemma 2's soft-capping).
void softcapInPlace(float* x, int64_t count, double cap);

}  // namespace kvscope
