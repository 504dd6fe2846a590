#pragma once
// Llama-family decoder (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM): RMSNorm, RoPE, grouped-query attention, SiLU-gated MLP.
#include <map>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"
#include "core/model/rope.h"

namespace kvscope {

class LlamaModel : public CausalLM {
 public:
  LlamaModel(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
             const c10::TensorOptions& options);
  static std::vector<TensorSpec> expectedTensors(const ModelConfig& config);
  NamedTensors namedParameters() const override;

 protected:
  at::Tensor forwardImpl(const at::Tensor& tokens, int64_t start_pos, KvCache* cache,
                         ProbeSink* probes) const override;

 private:
  struct Layer {
    at::Tensor input_norm;           // [hidden]
    at::Tensor wq, bq;               // [heads * head_dim, hidden], [heads * head_dim] or undefined
    at::Tensor wk, bk;               // [kv_heads * head_dim, hidden], ...
    at::Tensor wv, bv;               // [kv_heads * head_dim, hidden], ...
    at::Tensor wo, bo;               // [hidden, heads * head_dim], [hidden] or undefined
    at::Tensor post_attention_norm;  // [hidden]
    at::Tensor w_gate, b_gate;       // [intermediate, hidden]
    at::Tensor w_up, b_up;           // [intermediate, hidden]
    at::Tensor w_down, b_down;       // [hidden, intermediate]
  };
  at::Tensor attention(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                       const at::Tensor& sin, KvCache* cache, ProbeSink* probes) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x) const;
  at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& gain) const;

  at::Tensor embed_;       // [vocab, hidden]
  std::vector<Layer> layers_;
  at::Tensor final_norm_;  // [hidden]
  at::Tensor lm_head_;     // [vocab, hidden]; the embedding when tied
  Rope rope_;
};

}  // namespace kvscope
