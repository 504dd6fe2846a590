#include "core/model/gpt2_model.h"

#include <cmath>

#include "core/model/attention.h"
#include "core/model/dense.h"

namespace kvscope {
namespace {

std::string layerName(int64_t i, const char* leaf) {
  return "transformer.h." + std::to_string(i) + "." + leaf;
}

// Conv1D: y = x @ W + b with W stored [in, out].
at::Tensor conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) { return denseInOut(x, w, b); }

}  // namespace

std::vector<TensorSpec> Gpt2Model::expectedTensors(const ModelConfig& c) {
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  std::vector<TensorSpec> specs{{"transformer.wte.weight", {c.vocab_size, C}},
                                {"transformer.wpe.weight", {c.max_position_embeddings, C}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto add = [&](const char* leaf, std::vector<int64_t> shape) { specs.push_back({layerName(i, leaf), shape}); };
    add("ln_1.weight", {C});
    add("ln_1.bias", {C});
    add("attn.c_attn.weight", {C, 3 * C});
    add("attn.c_attn.bias", {3 * C});
    add("attn.c_proj.weight", {C, C});
    add("attn.c_proj.bias", {C});
    add("ln_2.weight", {C});
    add("ln_2.bias", {C});
    add("mlp.c_fc.weight", {C, I});
    add("mlp.c_fc.bias", {I});
    add("mlp.c_proj.weight", {I, C});
    add("mlp.c_proj.bias", {C});
  }
  specs.push_back({"transformer.ln_f.weight", {C}});
  specs.push_back({"transformer.ln_f.bias", {C}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, C}});
  return specs;
}

Gpt2Model::Gpt2Model(const ModelConfig& config, const std::map<std::string, at::Tensor>& w,
                     const c10::TensorOptions& options)
    : CausalLM(config, options) {
  wte_ = w.at("transformer.wte.weight");
  wpe_ = w.at("transformer.wpe.weight");
  for (int64_t i = 0; i < config.num_layers; ++i) {
    auto get = [&](const char* leaf) { return w.at(layerName(i, leaf)); };
    layers_.push_back(Layer{get("ln_1.weight"), get("ln_1.bias"), get("attn.c_attn.weight"),
                            get("attn.c_attn.bias"), get("attn.c_proj.weight"), get("attn.c_proj.bias"),
                            get("ln_2.weight"), get("ln_2.bias"), get("mlp.c_fc.weight"), get("mlp.c_fc.bias"),
                            get("mlp.c_proj.weight"), get("mlp.c_proj.bias")});
  }
  lnf_w_ = w.at("transformer.ln_f.weight");
  lnf_b_ = w.at("transformer.ln_f.bias");
  lm_head_ = config.tie_word_embeddings ? wte_ : w.at("lm_head.weight");
}

NamedTensors Gpt2Model::namedParameters() const {
  NamedTensors out{{"transformer.wte.weight", wte_}, {"transformer.wpe.weight", wpe_}};
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const auto idx = static_cast<int64_t>(i);
    for (const auto& [leaf, t] : std::vector<std::pair<const char*, at::Tensor>>{
             {"ln_1.weight", l.ln1_w}, {"ln_1.bias", l.ln1_b}, {"attn.c_attn.weight", l.c_attn_w},
             {"attn.c_attn.bias", l.c_attn_b}, {"attn.c_proj.weight", l.c_proj_w}, {"attn.c_proj.bias", l.c_proj_b},
             {"ln_2.weight", l.ln2_w}, {"ln_2.bias", l.ln2_b}, {"mlp.c_fc.weight", l.fc_w}, {"mlp.c_fc.bias", l.fc_b},
             {"mlp.c_proj.weight", l.proj_w}, {"mlp.c_proj.bias", l.proj_b}}) {
      out.emplace_back(layerName(idx, leaf), t);
    }
  }
  out.emplace_back("transformer.ln_f.weight", lnf_w_);
  out.emplace_back("transformer.ln_f.bias", lnf_b_);
  if (!config_.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head_);
  return out;
}

bool Gpt2Model::packedForInference(const ModelConfig& config, const TensorSpec& spec) {
  return spec.name == "lm_head.weight" || (spec.name == "transformer.wte.weight" && config.tie_word_embeddings);
}

void Gpt2Model::layOutForInference() {
  // The blocks' Conv1D weights are stored [in, out] already; only the head
  // (the token embedding when tied) is an [out, in] product.
  const bool tied = lm_head_.is_same(wte_);
  lm_head_ = packForInference(lm_head_);
  if (tied) wte_ = lm_head_;
}

at::Tensor Gpt2Model::layerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  return torch::layer_norm(x, {config_.hidden_size}, w, b, config_.norm_eps);
}

at::Tensor Gpt2Model::activation(const at::Tensor& x) const {
  const std::string& act = config_.activation;
  if (act == "relu") return torch::relu(x);
  if (act == "gelu") return torch::gelu(x);
  return torch::gelu(x, "tanh");  // gelu_new / gelu_pytorch_tanh
}

at::Tensor Gpt2Model::attention(const Layer& layer, int64_t index, const at::Tensor& x, const BatchRows& batch) const {
  const int64_t N = x.size(0), C = config_.hidden_size, H = config_.num_heads, D = config_.head_dim;
  batch.probeEach(Probe::LayerInput, index, x);
  auto qkv = conv1d(x, layer.c_attn_w, layer.c_attn_b);  // [N, 3C]: q | k | v, every sequence's rows at once
  auto heads = [&](int64_t part) { return qkv.narrow(1, part * C, C).view({N, H, D}).transpose(0, 1); };
  auto q = heads(0), k = heads(1), v = heads(2);  // [H, N, D] views; the cache's append copies them
  batch.probeEach(Probe::Query, index, q, 1);
  batch.probeEach(Probe::Key, index, k, 1);
  batch.probeEach(Probe::Value, index, v, 1);

  AttentionOptions options;
  options.scale = attentionScale(config_, index);
  const auto out = attendEachSequence(q, k, v, batch, index, options);  // [H, N, D]
  auto merged = out.transpose(0, 1).reshape({N, C});  // [N, C]
  auto projected = conv1d(merged, layer.c_proj_w, layer.c_proj_b);          // [N, C]
  batch.probeEach(Probe::AttentionProjected, index, projected);
  return projected;
}

at::Tensor Gpt2Model::mlp(const Layer& layer, const at::Tensor& x) const {
  return conv1d(activation(conv1d(x, layer.fc_w, layer.fc_b)), layer.proj_w, layer.proj_b);
}

at::Tensor Gpt2Model::forwardImpl(const BatchRows& batch) const {
  std::vector<at::Tensor> positions;
  for (size_t i = 0; i < batch.size(); ++i) positions.push_back(batch.positionsOf(i));
  // [N, C]; float32 rows of 16-bit tables
  auto x = denseRows(wte_, batch.tokens()) + denseRows(wpe_, BatchRows::join(positions, 0));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    x = x + attention(layer, static_cast<int64_t>(i), layerNorm(x, layer.ln1_w, layer.ln1_b), batch);
    x = x + mlp(layer, layerNorm(x, layer.ln2_w, layer.ln2_b));
    batch.probeEach(Probe::LayerOutput, static_cast<int64_t>(i), x);
  }
  x = batch.logitRows(x);                                 // [rows, C]
  return dense(layerNorm(x, lnf_w_, lnf_b_), lm_head_);  // [rows, vocab]
}

}  // namespace kvscope
