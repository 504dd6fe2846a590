#include "core/model/llama_model.h"

#include <cmath>

#include "core/model/attention.h"

namespace kvscope {
namespace {

std::string layerName(int64_t i, const char* leaf) {
  return "model.layers." + std::to_string(i) + "." + leaf;
}

at::Tensor optional(const std::map<std::string, at::Tensor>& w, const std::string& name, bool present) {
  return present ? w.at(name) : at::Tensor();
}

}  // namespace

std::vector<TensorSpec> LlamaModel::expectedTensors(const ModelConfig& c) {
  const int64_t C = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.num_heads * c.head_dim, KD = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> specs{{"model.embed_tokens.weight", {V, C}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto add = [&](const char* leaf, std::vector<int64_t> shape) { specs.push_back({layerName(i, leaf), shape}); };
    add("input_layernorm.weight", {C});
    add("self_attn.q_proj.weight", {QD, C});
    add("self_attn.k_proj.weight", {KD, C});
    add("self_attn.v_proj.weight", {KD, C});
    if (c.qkv_bias) {
      add("self_attn.q_proj.bias", {QD});
      add("self_attn.k_proj.bias", {KD});
      add("self_attn.v_proj.bias", {KD});
    }
    add("self_attn.o_proj.weight", {C, QD});
    if (c.o_bias) add("self_attn.o_proj.bias", {C});
    add("post_attention_layernorm.weight", {C});
    add("mlp.gate_proj.weight", {I, C});
    add("mlp.up_proj.weight", {I, C});
    add("mlp.down_proj.weight", {C, I});
    if (c.mlp_bias) {
      add("mlp.gate_proj.bias", {I});
      add("mlp.up_proj.bias", {I});
      add("mlp.down_proj.bias", {C});
    }
  }
  specs.push_back({"model.norm.weight", {C}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {V, C}});
  return specs;
}

LlamaModel::LlamaModel(const ModelConfig& config, const std::map<std::string, at::Tensor>& w,
                       const c10::TensorOptions& options)
    : CausalLM(config, options), rope_(config) {
  embed_ = w.at("model.embed_tokens.weight");
  for (int64_t i = 0; i < config.num_layers; ++i) {
    auto get = [&](const char* leaf) { return w.at(layerName(i, leaf)); };
    auto maybe = [&](const char* leaf, bool present) { return optional(w, layerName(i, leaf), present); };
    Layer layer;
    layer.input_norm = get("input_layernorm.weight");
    layer.wq = get("self_attn.q_proj.weight");
    layer.wk = get("self_attn.k_proj.weight");
    layer.wv = get("self_attn.v_proj.weight");
    layer.bq = maybe("self_attn.q_proj.bias", config.qkv_bias);
    layer.bk = maybe("self_attn.k_proj.bias", config.qkv_bias);
    layer.bv = maybe("self_attn.v_proj.bias", config.qkv_bias);
    layer.wo = get("self_attn.o_proj.weight");
    layer.bo = maybe("self_attn.o_proj.bias", config.o_bias);
    layer.post_attention_norm = get("post_attention_layernorm.weight");
    layer.w_gate = get("mlp.gate_proj.weight");
    layer.w_up = get("mlp.up_proj.weight");
    layer.w_down = get("mlp.down_proj.weight");
    layer.b_gate = maybe("mlp.gate_proj.bias", config.mlp_bias);
    layer.b_up = maybe("mlp.up_proj.bias", config.mlp_bias);
    layer.b_down = maybe("mlp.down_proj.bias", config.mlp_bias);
    layers_.push_back(layer);
  }
  final_norm_ = w.at("model.norm.weight");
  lm_head_ = config.tie_word_embeddings ? embed_ : w.at("lm_head.weight");
}

NamedTensors LlamaModel::namedParameters() const {
  NamedTensors out{{"model.embed_tokens.weight", embed_}};
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    auto add = [&](const char* leaf, const at::Tensor& t) {
      if (t.defined()) out.emplace_back(layerName(static_cast<int64_t>(i), leaf), t);
    };
    add("input_layernorm.weight", l.input_norm);
    add("self_attn.q_proj.weight", l.wq);
    add("self_attn.q_proj.bias", l.bq);
    add("self_attn.k_proj.weight", l.wk);
    add("self_attn.k_proj.bias", l.bk);
    add("self_attn.v_proj.weight", l.wv);
    add("self_attn.v_proj.bias", l.bv);
    add("self_attn.o_proj.weight", l.wo);
    add("self_attn.o_proj.bias", l.bo);
    add("post_attention_layernorm.weight", l.post_attention_norm);
    add("mlp.gate_proj.weight", l.w_gate);
    add("mlp.gate_proj.bias", l.b_gate);
    add("mlp.up_proj.weight", l.w_up);
    add("mlp.up_proj.bias", l.b_up);
    add("mlp.down_proj.weight", l.w_down);
    add("mlp.down_proj.bias", l.b_down);
  }
  out.emplace_back("model.norm.weight", final_norm_);
  if (!config_.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head_);
  return out;
}

at::Tensor LlamaModel::rmsNorm(const at::Tensor& x, const at::Tensor& gain) const {
  auto x32 = x.to(torch::kFloat32);
  auto variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return gain * (x32 * torch::rsqrt(variance + config_.norm_eps)).to(x.scalar_type());
}

at::Tensor LlamaModel::attention(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                                 const at::Tensor& sin, KvCache* cache, ProbeSink* probes) const {
  const int64_t n = x.size(0), D = config_.head_dim;
  auto heads = [&](const at::Tensor& projected, int64_t count) {  // [n, count * D] -> [count, n, D]
    return projected.view({n, count, D}).transpose(0, 1);
  };
  auto q = heads(torch::linear(x, layer.wq, layer.bq), config_.num_heads);     // [H, n, D]
  auto k = heads(torch::linear(x, layer.wk, layer.bk), config_.num_kv_heads);  // [Hkv, n, D]
  auto v = heads(torch::linear(x, layer.wv, layer.bv), config_.num_kv_heads);  // [Hkv, n, D]
  q = Rope::apply(q, cos, sin);
  k = Rope::apply(k, cos, sin);
  probe(probes, Probe::Query, index, q);
  probe(probes, Probe::Key, index, k);
  probe(probes, Probe::Value, index, v);

  auto [keys, values] = keysAndValues(k.contiguous(), v.contiguous(), index, cache);  // [Hkv, T, D]
  auto out = causalAttention(q, keys, values, 1.0 / std::sqrt(static_cast<double>(D)), index, probes,
                             cache == nullptr || cache->causalAmongNewRows());
  auto merged = out.transpose(0, 1).reshape({n, config_.num_heads * D});  // [n, H * D]
  return torch::linear(merged, layer.wo, layer.bo);                        // [n, hidden]
}

at::Tensor LlamaModel::mlp(const Layer& layer, const at::Tensor& x) const {
  auto gate = torch::silu(torch::linear(x, layer.w_gate, layer.b_gate));  // [n, intermediate]
  auto up = torch::linear(x, layer.w_up, layer.b_up);                     // [n, intermediate]
  return torch::linear(gate * up, layer.w_down, layer.b_down);            // [n, hidden]
}

at::Tensor LlamaModel::forwardImpl(const at::Tensor& tokens, int64_t start_pos, KvCache* cache,
                                   ProbeSink* probes) const {
  const int64_t n = tokens.size(0);
  auto positions = torch::arange(start_pos, start_pos + n, torch::kInt64);
  auto [cos, sin] = rope_.table(positions);  // [n, D] each
  auto x = embed_.index_select(0, tokens);   // [n, hidden]
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    // Attention block: pre-norm, attention, residual.
    x = x + attention(layer, static_cast<int64_t>(i), rmsNorm(x, layer.input_norm), cos, sin, cache, probes);
    // MLP block: pre-norm, gated MLP, residual.
    x = x + mlp(layer, rmsNorm(x, layer.post_attention_norm));
  }
  return torch::linear(rmsNorm(x, final_norm_), lm_head_);  // [n, vocab]
}

}  // namespace kvscope
