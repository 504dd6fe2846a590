#include "core/model/llama_model.h"

#include <cmath>

#include "core/model/attention.h"
#include "core/model/dense.h"

namespace kvscope {
namespace {

std::string layerName(int64_t i, const char* leaf) {
  return "model.layers." + std::to_string(i) + "." + leaf;
}

bool presentIn(const LayerWeightSpec& spec, const ModelConfig& c) { return spec.present == nullptr || spec.present(c); }

// cap * tanh(x / cap): Gemma 2's soft-capping of attention scores and logits.
at::Tensor softcap(const at::Tensor& x, double cap) { return cap > 0 ? (x / cap).tanh() * cap : x; }

}  // namespace

std::vector<TensorSpec> LlamaModel::expectedTensors(const ModelConfig& c) {
  std::vector<TensorSpec> specs{{"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    for (const LayerWeightSpec& w : layerWeightSpecs(c.family)) {
      if (presentIn(w, c)) specs.push_back({layerName(i, w.leaf), w.shape(c)});
    }
  }
  specs.push_back({"model.norm.weight", {c.hidden_size}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  return specs;
}

LlamaModel::LlamaModel(const ModelConfig& config, std::map<std::string, at::Tensor> w,
                       const c10::TensorOptions& options)
    : CausalLM(config, options), rope_(config) {
  embed_ = w.at("model.embed_tokens.weight");
  for (int64_t i = 0; i < config.num_layers; ++i) {
    Layer layer;
    for (const LayerWeightSpec& spec : layerWeightSpecs(config.family)) {
      if (presentIn(spec, config)) layer.*spec.slot = std::move(w.at(layerName(i, spec.leaf)));
    }
    fuseProjections(layer);  // loaded in the inference layout: panels; the parts' own copies freed here
    layers_.push_back(layer);
  }
  final_norm_ = w.at("model.norm.weight");
  lm_head_ = config.tie_word_embeddings ? embed_ : w.at("lm_head.weight");
}

std::vector<std::vector<std::string>> LlamaModel::fusedTensorGroups(const ModelConfig& config) {
  std::vector<std::vector<std::string>> groups;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    for (const std::vector<WeightSlot>& slots : fusedWeightGroups()) {
      std::vector<std::string> names;
      for (WeightSlot slot : slots) {
        for (const LayerWeightSpec& spec : layerWeightSpecs(config.family)) {
          if (spec.slot == slot && presentIn(spec, config)) names.push_back(layerName(i, spec.leaf));
        }
      }
      if (names.size() == slots.size()) groups.push_back(names);  // Phi-3 stores them fused: no parts
    }
  }
  return groups;
}

NamedTensors LlamaModel::namedParameters() const {
  NamedTensors out{{"model.embed_tokens.weight", embed_}};
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const LayerWeightSpec& spec : layerWeightSpecs(config_.family)) {
      const at::Tensor& t = layers_[i].*spec.slot;
      if (t.defined()) out.emplace_back(layerName(static_cast<int64_t>(i), spec.leaf), t);
    }
  }
  out.emplace_back("model.norm.weight", final_norm_);
  if (!config_.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head_);
  return out;
}

bool LlamaModel::packedForInference(const ModelConfig& config, const TensorSpec& spec) {
  // Every 2-D tensor but the embedding is a dense [out, in] weight; the
  // embedding is one too when it doubles as the head.
  if (spec.shape.size() != 2) return false;
  return spec.name != "model.embed_tokens.weight" || config.tie_word_embeddings;
}

void LlamaModel::layOutForInference() {
  for (Layer& layer : layers_) {
    for (const LayerWeightSpec& spec : layerWeightSpecs(config_.family)) {
      at::Tensor& weight = layer.*spec.slot;
      if (weight.defined()) weight = packForInference(weight);  // 1-D norms and biases pass through
    }
    fuseProjections(layer);
  }
  // A tied head is the embedding itself: re-store it once, keep them one tensor.
  const bool tied = lm_head_.is_same(embed_);
  lm_head_ = packForInference(lm_head_);
  if (tied) embed_ = lm_head_;
}

at::Tensor LlamaModel::rmsNorm(const at::Tensor& x, const at::Tensor& gain) const {
  auto x32 = x.to(torch::kFloat32);
  auto normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + config_.norm_eps);
  // Gemma 2 stores the gain as an offset from 1 and scales in float32.
  if (config_.family == DecoderFamily::Gemma2) return (normed * (1.0 + gain.to(torch::kFloat32))).to(x.scalar_type());
  return gain * normed.to(x.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> LlamaModel::project(const Layer& layer, const at::Tensor& x) const {
  const int64_t n = x.size(0), D = config_.head_dim;
  const int64_t QD = config_.num_heads * D, KD = config_.num_kv_heads * D;
  at::Tensor q, k, v;  // [n, QD], [n, KD], [n, KD]
  if (layer.w_qkv.defined()) {  // Phi-3, or fused for inference: rows [q | k | v]
    auto qkv = dense(x, layer.w_qkv, layer.b_qkv);
    q = qkv.narrow(1, 0, QD);
    k = qkv.narrow(1, QD, KD);
    v = qkv.narrow(1, QD + KD, KD);
  } else {
    q = dense(x, layer.wq, layer.bq);
    k = dense(x, layer.wk, layer.bk);
    v = dense(x, layer.wv, layer.bv);
  }
  auto heads = [&](const at::Tensor& projected, int64_t count) {  // [n, count * D] -> [count, n, D]
    return projected.reshape({n, count, D}).transpose(0, 1);
  };
  return {heads(q, config_.num_heads), heads(k, config_.num_kv_heads), heads(v, config_.num_kv_heads)};
}

at::Tensor LlamaModel::attention(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                                 const at::Tensor& sin, const BatchRows& batch) const {
  const int64_t N = x.size(0), D = config_.head_dim;
  batch.probeEach(Probe::LayerInput, index, x);
  auto [q, k, v] = project(layer, x);  // [H, N, D], [Hkv, N, D], [Hkv, N, D]: every sequence's rows at once
  if (config_.qk_norm) {               // Qwen3: per head, over head_dim, before RoPE
    q = rmsNorm(q, layer.q_norm);
    k = rmsNorm(k, layer.k_norm);
  }
  batch.probeEach(Probe::QueryBeforeRope, index, q, 1);
  batch.probeEach(Probe::KeyBeforeRope, index, k, 1);
  q = Rope::apply(q, cos, sin);  // cos, sin [N, D]: each row at its own sequence's position
  k = Rope::apply(k, cos, sin);
  batch.probeEach(Probe::Query, index, q, 1);
  batch.probeEach(Probe::Key, index, k, 1);
  batch.probeEach(Probe::Value, index, v, 1);

  AttentionOptions options;
  options.scale = attentionScale(config_, index);
  options.softcap = config_.attn_logit_softcap;
  options.window = config_.windowOf(index);
  const auto out = attendEachSequence(q, k, v, batch, index, options);  // [H, N, D]
  auto merged = out.transpose(0, 1).reshape({N, config_.num_heads * D});  // [N, H * D]
  auto projected = dense(merged, layer.wo, layer.bo);                                            // [N, hidden]
  batch.probeEach(Probe::AttentionProjected, index, projected);
  return projected;
}

at::Tensor LlamaModel::mlp(const Layer& layer, const at::Tensor& x) const {
  at::Tensor gate, up;  // [n, intermediate] each
  if (layer.w_gate_up.defined()) {  // Phi-3, or fused for inference: rows [gate | up]
    auto both = dense(x, layer.w_gate_up, layer.b_gate_up);
    gate = both.narrow(1, 0, config_.intermediate_size);
    up = both.narrow(1, config_.intermediate_size, config_.intermediate_size);
  } else {
    gate = dense(x, layer.w_gate, layer.b_gate);
    up = dense(x, layer.w_up, layer.b_up);
  }
  auto activated = config_.activation == "gelu_pytorch_tanh" ? torch::gelu(gate, "tanh") : torch::silu(gate);
  return dense(activated * up, layer.w_down, layer.b_down);  // [n, hidden]
}

at::Tensor LlamaModel::block(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                             const at::Tensor& sin, const BatchRows& batch) const {
  if (config_.family == DecoderFamily::Gemma2) {
    // Norms on both sides of each sub-block, before the residual add.
    auto h = x + rmsNorm(attention(layer, index, rmsNorm(x, layer.input_norm), cos, sin, batch),
                         layer.post_attention_norm);
    return h + rmsNorm(mlp(layer, rmsNorm(h, layer.pre_ff_norm)), layer.post_ff_norm);
  }
  // Pre-norm attention and MLP, each with a residual.
  auto h = x + attention(layer, index, rmsNorm(x, layer.input_norm), cos, sin, batch);
  return h + mlp(layer, rmsNorm(h, layer.post_attention_norm));
}

at::Tensor LlamaModel::forwardImpl(const BatchRows& batch) const {
  if (leanForwardApplies(batch)) return leanForward(batch);
  // Each sequence's rotary table from its own positions (longrope picks its
  // factor set per sequence, as that sequence's forward alone would).
  std::vector<at::Tensor> cos_parts, sin_parts;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto [cos, sin] = rope_.table(batch.positionsOf(i));  // [n_i, D] each
    cos_parts.push_back(cos);
    sin_parts.push_back(sin);
  }
  const at::Tensor cos = BatchRows::join(cos_parts, 0), sin = BatchRows::join(sin_parts, 0);  // [N, D]
  auto x = denseRows(embed_, batch.tokens());  // [N, hidden] (a tied embedding may be panels)
  if (config_.family == DecoderFamily::Gemma2) {
    // sqrt(hidden) rounded to the compute dtype first, as the reference does.
    x = x * torch::tensor(std::sqrt(static_cast<double>(config_.hidden_size)), x.options());
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = block(layers_[i], static_cast<int64_t>(i), x, cos, sin, batch);
    batch.probeEach(Probe::LayerOutput, static_cast<int64_t>(i), x);
  }
  x = batch.logitRows(x);                                                                  // [rows, hidden]
  return softcap(dense(rmsNorm(x, final_norm_), lm_head_), config_.final_logit_softcap);  // [rows, vocab]
}

}  // namespace kvscope
