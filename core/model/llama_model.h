#pragma once
// The decoder built from Llama's blocks: RMSNorm, rotary embeddings,
// grouped-query attention, a gated MLP. One class for every family
// (LlamaForCausalLM, Qwen2, Mistral, Qwen3, Gemma 2, Phi-3); what a family
// changes is its weight table (core/model/decoder_family.h) and the few
// switches of its ModelConfig (q/k norms, norms around the blocks, soft-caps,
// sliding windows, longrope).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"
#include "core/model/decoder_family.h"
#include "core/model/forward_workspace.h"
#include "core/model/rope.h"

namespace kvscope {

struct LeanBuffers;  // llama_lean_forward.cpp

class LlamaModel : public CausalLM {
 public:
  // weights: by value, so each layer's parts are released as they are fused.
  LlamaModel(const ModelConfig& config, std::map<std::string, at::Tensor> weights,
             const c10::TensorOptions& options);
  static std::vector<TensorSpec> expectedTensors(const ModelConfig& config);
  // Whether layOutForInference keeps this checkpoint tensor column-major, so
  // the loader can lay it out so while converting it.
  static bool packedForInference(const ModelConfig& config, const TensorSpec& spec);
  // The checkpoint names of every layer's weights that fuseProjections joins
  // (core/model/decoder_family.h), group by group in fused order, so the
  // loader can read each part straight into its slice of one tensor.
  static std::vector<std::vector<std::string>> fusedTensorGroups(const ModelConfig& config);
  NamedTensors namedParameters() const override;
  void layOutForInference() override;

 protected:
  at::Tensor forwardImpl(const BatchRows& batch) const override;

 private:
  using Layer = DecoderLayerWeights;
  // q [heads, n, D], k and v [kv_heads, n, D] of one layer, before the rotary embedding.
  std::tuple<at::Tensor, at::Tensor, at::Tensor> project(const Layer& layer, const at::Tensor& x) const;
  // x [N, hidden] (every sequence's rows, normed) -> [N, hidden]; cos, sin [N, D].
  at::Tensor attention(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                       const at::Tensor& sin, const BatchRows& batch) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x) const;
  at::Tensor block(const Layer& layer, int64_t index, const at::Tensor& x, const at::Tensor& cos,
                   const at::Tensor& sin, const BatchRows& batch) const;
  at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& gain) const;

  // The lean forward (llama_lean_forward.cpp): up to 16 rows in float32 on
  // the CPU recording no probe but Key and Value, each layer's steps written as small
  // loops and few-row products into the model's reused workspace instead of
  // ATen operations. Same arithmetic as the tensor path above but for the
  // order of a few float32 sums (docs/performance.md, "How the speed is reached").
  bool leanForwardApplies(const BatchRows& batch) const;
  at::Tensor leanForward(const BatchRows& batch) const;
  WorkspaceShape workspaceShape() const;
  // cos, sin rows [N, head_dim] of every row's position into the buffers.
  void leanRotaryRows(const BatchRows& batch, ForwardWorkspace& ws, const LeanBuffers& b) const;
  void leanBlock(const Layer& layer, int64_t index, const BatchRows& batch, ForwardWorkspace& ws,
                 const LeanBuffers& b) const;
  void leanProjectQkv(const Layer& layer, const LeanBuffers& b) const;
  void leanAttention(int64_t index, const BatchRows& batch, ForwardWorkspace& ws, const LeanBuffers& b) const;
  void leanMlp(const Layer& layer, const LeanBuffers& b) const;
  at::Tensor leanLogits(const BatchRows& batch, const LeanBuffers& b) const;

  at::Tensor embed_;       // [vocab, hidden]
  std::vector<Layer> layers_;
  at::Tensor final_norm_;  // [hidden]
  at::Tensor lm_head_;     // [vocab, hidden]; the embedding when tied
  Rope rope_;
  mutable std::unique_ptr<ForwardWorkspace> workspace_;  // the lean forward's buffers
  mutable std::mutex workspace_mutex_;
};

// Switches the lean forward off and on again (tests comparing it with the
// tensor path, benchmarks measuring what it gains). On by default.
void setLeanForwardEnabled(bool enabled);
bool leanForwardEnabled();

}  // namespace kvscope
