#pragma once
// One query's attention in layer 0 (and every head of it through o_proj),
// recomputed in double precision with plain loops from the checkpoint's
// tensors and config.json: none of the engine's norm, projection, rotary or
// attention code is used. GPT-2, Llama, Mistral (sliding window) and Gemma 2
// (embedding scale, (1 + gain) norm, query_pre_attn_scalar, soft-capping,
// sliding window on even layers).
#include <torch/types.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/checkpoint.h"
#include "session_test_support.h"

namespace kvscope::testing_support {

using Vector = std::vector<double>;
using Matrix = std::vector<Vector>;

struct ReferenceAttention {
  Vector hidden;         // [hidden] layer 0's input after its norm, at the query position
  Vector q_before_rope;  // [D]
  Vector q;              // [D]
  Matrix keys, values;   // [P + 1][D], the query's kv head
  Vector scores;         // [P + 1] q . k
  Vector weights;        // [P + 1]
  Vector output;         // [D]
};

// Layer 0's output projection at the query position, from the same loops.
struct ReferenceProjection {
  Vector head_contribution;  // [hidden] the head's slice of o_proj (c_proj) times its output
  Vector projected;          // [hidden] every head's share plus the bias
};

inline Matrix toMatrix(const at::Tensor& t) {  // t: [rows, cols] or [cols]
  const auto d = (t.dim() == 1 ? t.unsqueeze(0) : t).to(torch::kFloat64).contiguous();
  Matrix out(d.size(0), Vector(d.size(1)));
  for (int64_t r = 0; r < d.size(0); ++r) {
    for (int64_t c = 0; c < d.size(1); ++c) out[r][c] = d.data_ptr<double>()[r * d.size(1) + c];
  }
  return out;
}

class ReferenceLayer0 {
 public:
  explicit ReferenceLayer0(const std::string& model_name)
      : checkpoint_(Checkpoint::open(modelDir(model_name))),
        config_(readJson(fs::path(modelDir(model_name)) / "config.json")),
        type_(config_.at("model_type").get<std::string>()) {
    hidden_size_ = gpt2() ? config_.at("n_embd").get<int64_t>() : config_.at("hidden_size").get<int64_t>();
    heads_ = gpt2() ? config_.at("n_head").get<int64_t>() : config_.at("num_attention_heads").get<int64_t>();
    kv_heads_ = gpt2() ? heads_ : config_.value("num_key_value_heads", heads_);
    head_dim_ = config_.contains("head_dim") && !config_["head_dim"].is_null() ? config_["head_dim"].get<int64_t>()
                                                                              : hidden_size_ / heads_;
  }

  ReferenceAttention run(const std::vector<int64_t>& ids, int64_t head, int64_t position) const {
    const int64_t kv_head = head / (heads_ / kv_heads_);
    ReferenceAttention ref;
    for (int64_t j = 0; j <= position; ++j) {
      const Vector x = normedInput(ids[j], j);
      ref.keys.push_back(rotate(project("k", x, kv_head), j));
      ref.values.push_back(project("v", x, kv_head));
      if (j == position) {
        ref.hidden = x;
        ref.q_before_rope = project("q", x, head);
        ref.q = rotate(ref.q_before_rope, j);
      }
    }
    attend(ref, position);
    return ref;
  }

  // Every head of layer 0 at `position` through o_proj (GPT-2: c_proj [in,
  // out]; Llama family: o_proj [out, in], optional bias).
  ReferenceProjection runThroughOutputProjection(const std::vector<int64_t>& ids, int64_t head,
                                                 int64_t position) const {
    const bool has_bias = gpt2() || checkpoint_.has("model.layers.0.self_attn.o_proj.bias");
    const std::string name = gpt2() ? "transformer.h.0.attn.c_proj." : "model.layers.0.self_attn.o_proj.";
    const Matrix w = load(name + "weight");
    ReferenceProjection out;
    out.projected = has_bias ? load(name + "bias")[0] : Vector(hidden_size_, 0.0);
    for (int64_t h = 0; h < heads_; ++h) {
      const Vector o = run(ids, h, position).output;
      Vector share(hidden_size_, 0.0);
      for (int64_t r = 0; r < hidden_size_; ++r) {
        for (int64_t c = 0; c < head_dim_; ++c) {
          share[r] += (gpt2() ? w[h * head_dim_ + c][r] : w[r][h * head_dim_ + c]) * o[c];
        }
        out.projected[r] += share[r];
      }
      if (h == head) out.head_contribution = share;
    }
    return out;
  }

 private:
  bool gpt2() const { return type_ == "gpt2"; }
  bool gemma2() const { return type_ == "gemma2"; }
  Matrix load(const std::string& name) const { return toMatrix(checkpoint_.load(name, torch::kFloat64)); }

  Vector normedInput(int64_t id, int64_t position) const {
    if (gpt2()) {
      Vector x = load("transformer.wte.weight")[id];
      const Vector pos = load("transformer.wpe.weight")[position];
      for (size_t i = 0; i < x.size(); ++i) x[i] += pos[i];
      double mean = 0, var = 0;
      for (double v : x) mean += v / x.size();
      for (double v : x) var += (v - mean) * (v - mean) / x.size();
      const Vector w = load("transformer.h.0.ln_1.weight")[0], b = load("transformer.h.0.ln_1.bias")[0];
      for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
      return x;
    }
    Vector x = load("model.embed_tokens.weight")[id];
    if (gemma2()) {
      for (double& v : x) v *= std::sqrt(static_cast<double>(hidden_size_));
    }
    double mean_square = 0;
    for (double v : x) mean_square += v * v / x.size();
    const double eps = config_.at("rms_norm_eps").get<double>();
    const Vector gain = load("model.layers.0.input_layernorm.weight")[0];
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = x[i] / std::sqrt(mean_square + eps) * (gemma2() ? 1.0 + gain[i] : gain[i]);
    }
    return x;
  }

  // Head `index` of projection "q", "k" or "v" of x.
  Vector project(const std::string& which, const Vector& x, int64_t index) const {
    Vector out(head_dim_, 0.0);
    if (gpt2()) {  // c_attn: [C, 3C], columns q | k | v
      const Matrix w = load("transformer.h.0.attn.c_attn.weight");
      const Vector b = load("transformer.h.0.attn.c_attn.bias")[0];
      const int64_t part = which == "q" ? 0 : which == "k" ? 1 : 2;
      for (int64_t c = 0; c < head_dim_; ++c) {
        const int64_t column = part * hidden_size_ + index * head_dim_ + c;
        out[c] = b[column];
        for (int64_t i = 0; i < hidden_size_; ++i) out[c] += x[i] * w[i][column];
      }
      return out;
    }
    const Matrix w = load("model.layers.0.self_attn." + which + "_proj.weight");  // [heads * D, C]
    for (int64_t c = 0; c < head_dim_; ++c) {
      for (int64_t i = 0; i < hidden_size_; ++i) out[c] += w[index * head_dim_ + c][i] * x[i];
    }
    return out;
  }

  // Channel i turns with channel i + D/2 by position * base^(-2i/D).
  Vector rotate(const Vector& x, int64_t position) const {
    if (gpt2()) return x;
    const double base = config_.value("rope_theta", 10000.0);
    const int64_t half = head_dim_ / 2;
    Vector out(x.size());
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(position) * std::pow(base, -2.0 * i / head_dim_);
      out[i] = x[i] * std::cos(angle) - x[i + half] * std::sin(angle);
      out[i + half] = x[i + half] * std::cos(angle) + x[i] * std::sin(angle);
    }
    return out;
  }

  void attend(ReferenceAttention& ref, int64_t position) const {
    double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    if (gemma2()) scale = 1.0 / std::sqrt(config_.at("query_pre_attn_scalar").get<double>());
    const double cap = gemma2() ? config_.value("attn_logit_softcapping", 0.0) : 0.0;
    // Layer 0 slides in Mistral (every layer) and Gemma 2 (even layers).
    const bool windowed = type_ == "mistral" || gemma2();
    const int64_t window = windowed && config_.contains("sliding_window") && !config_["sliding_window"].is_null()
                               ? config_["sliding_window"].get<int64_t>() : 0;
    Vector logits;
    double top = -1e300;
    for (int64_t j = 0; j <= position; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < head_dim_; ++c) dot += ref.q[c] * ref.keys[j][c];
      ref.scores.push_back(dot);
      double logit = dot * scale;
      if (cap > 0) logit = cap * std::tanh(logit / cap);
      const bool visible = window == 0 || j > position - window;
      logits.push_back(visible ? logit : -INFINITY);
      if (visible) top = std::max(top, logit);
    }
    double total = 0;
    for (double l : logits) total += std::exp(l - top);
    ref.output.assign(head_dim_, 0.0);
    for (int64_t j = 0; j <= position; ++j) {
      ref.weights.push_back(std::exp(logits[j] - top) / total);
      for (int64_t c = 0; c < head_dim_; ++c) ref.output[c] += ref.weights[j] * ref.values[j][c];
    }
  }

  Checkpoint checkpoint_;
  nlohmann::json config_;
  std::string type_;
  int64_t hidden_size_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0;
};

// max |a - b| over a tensor and a reference vector / matrix.
inline double maxDifference(const at::Tensor& t, const Vector& ref) {
  const Matrix m = toMatrix(t);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(m[0][i] - ref[i]));
  return ref.size() == m[0].size() ? worst : INFINITY;
}

inline double maxDifference(const at::Tensor& t, const Matrix& ref) {
  double worst = 0;
  if (t.size(0) != static_cast<int64_t>(ref.size())) return INFINITY;
  for (size_t r = 0; r < ref.size(); ++r) worst = std::max(worst, maxDifference(t[r], ref[r]));
  return worst;
}

}  // namespace kvscope::testing_support
