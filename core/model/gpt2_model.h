#pragma once
// GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm, fused q|k|v Conv1D
// projections stored [in, out], GELU MLP.
#include <map>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"

namespace kvscope {

class Gpt2Model : public CausalLM {
 public:
  Gpt2Model(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
            const c10::TensorOptions& options);
  // Canonical names carry the "transformer." prefix; the loader also accepts
  // checkpoints saved without it.
  static std::vector<TensorSpec> expectedTensors(const ModelConfig& config);
  // Whether layOutForInference keeps this checkpoint tensor column-major, so
  // the loader can lay it out so while converting it.
  static bool packedForInference(const ModelConfig& config, const TensorSpec& spec);
  NamedTensors namedParameters() const override;
  void layOutForInference() override;

 protected:
  at::Tensor forwardImpl(const BatchRows& batch) const override;

 private:
  struct Layer {
    at::Tensor ln1_w, ln1_b;        // [hidden]
    at::Tensor c_attn_w, c_attn_b;  // [hidden, 3 * hidden] (Conv1D: in, out), [3 * hidden]
    at::Tensor c_proj_w, c_proj_b;  // [hidden, hidden], [hidden]
    at::Tensor ln2_w, ln2_b;        // [hidden]
    at::Tensor fc_w, fc_b;          // [hidden, inner], [inner]
    at::Tensor proj_w, proj_b;      // [inner, hidden], [hidden]
  };
  // x [N, hidden] (every sequence's rows, normed) -> [N, hidden].
  at::Tensor attention(const Layer& layer, int64_t index, const at::Tensor& x, const BatchRows& batch) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x) const;
  at::Tensor activation(const at::Tensor& x) const;
  at::Tensor layerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;

  at::Tensor wte_;  // [vocab, hidden]
  at::Tensor wpe_;  // [positions, hidden]
  std::vector<Layer> layers_;
  at::Tensor lnf_w_, lnf_b_;  // [hidden]
  at::Tensor lm_head_;        // [vocab, hidden]; wte when tied
};

}  // namespace kvscope
