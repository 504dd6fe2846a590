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
    case RopeScaling::Type::LongRope: {
      // HF: 1 / (factors * base ** (arange(0, dim, 2) / dim)), float32.
      const auto base_pow = torch::pow(static_cast<float>(config.rope_theta), exponents);
      auto factors = [](const std::vector<double>& f) { return torch::tensor(f, torch::kFloat64).to(torch::kFloat32); };
      inv_freq_ = 1.0 / (factors(config.rope_scaling.short_factor) * base_pow);
      long_inv_freq_ = (1.0 / (factors(config.rope_scaling.long_factor) * base_pow)).to(torch::kFloat32);
      original_context_ = config.rope_scaling.original_max_position_embeddings;
      const double scale = static_cast<double>(config.max_position_embeddings) / static_cast<double>(original_context_);
      if (scale > 1.0) cos_sin_scale_ = std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original_context_)));
      break;
    }
  }
  inv_freq_ = inv_freq_.to(torch::kFloat32);
}

at::Tensor Rope::angles(const at::Tensor& positions) const {
  const bool long_factors = positions.numel() > 0 && usesLongFactors(positions.max().item<int64_t>());
  const at::Tensor& inv_freq = long_factors ? long_inv_freq_ : inv_freq_;
  return positions.to(torch::kFloat32).unsqueeze(1) * inv_freq.unsqueeze(0);  // [n, dim/2]
}

std::pair<at::Tensor, at::Tensor> Rope::table(const at::Tensor& positions) const {
  auto freqs = angles(positions);            // [n, dim/2]
  auto emb = torch::cat({freqs, freqs}, 1);  // [n, dim]
  if (cos_sin_scale_ != 1.0) return {emb.cos() * cos_sin_scale_, emb.sin() * cos_sin_scale_};
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
