#include "core/model/rope.h"

#include <cmath>

namespace kvscope {
namespace {

// Llama 3.1: wavelengths longer than the original context are stretched by
// `factor`, short ones kept, and the band between is interpolated.
at::Tensor llama3Scaled(const at::Tensor& inv_freq, const RopeScaling& s) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  auto smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

Rope::Rope(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  // Same arithmetic as HF: base ** (arange(0, dim, 2).float() / dim), float32.
  auto exponents = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<float>(dim);
  inv_freq_ = 1.0 / torch::pow(static_cast<float>(config.rope_theta), exponents);
  switch (config.rope_scaling.type) {
    case RopeScaling::Type::None: break;
    case RopeScaling::Type::Linear: inv_freq_ = inv_freq_ / config.rope_scaling.factor; break;
    case RopeScaling::Type::Llama3: inv_freq_ = llama3Scaled(inv_freq_, config.rope_scaling); break;
  }
  inv_freq_ = inv_freq_.to(torch::kFloat32);
}

std::pair<at::Tensor, at::Tensor> Rope::table(const at::Tensor& positions) const {
  auto freqs = positions.to(torch::kFloat32).unsqueeze(1) * inv_freq_.unsqueeze(0);  // [n, dim/2]
  auto emb = torch::cat({freqs, freqs}, 1);                                          // [n, dim]
  return {emb.cos(), emb.sin()};
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = torch::cat({-x2, x1}, -1);  // rotate_half
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

}  // namespace kvscope
