#pragma once
// Named probe points inside the forward pass. A ProbeSink says which points it
// wants; the forward asks before copying anything, so a forward with no sink
// (or a sink that wants nothing) does no extra work.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

enum class Probe {
  Query,             // [heads, n, head_dim], after RoPE
  Key,               // [kv_heads, n, head_dim], the rows this forward writes, after RoPE
  Value,             // [kv_heads, n, head_dim], the rows this forward writes
  AttentionWeights,  // [heads, n, keys] softmax weights over all visible keys
  AttentionOutput,   // [heads, n, head_dim] weighted values, before the output projection
  AttentionMask,     // [n, keys] bool, true where a query may see a key (the mask actually applied)
  LayerInput,        // [n, hidden] the hidden state entering the layer's attention, after its norm
  QueryBeforeRope,   // [heads, n, head_dim] what RoPE rotates (after Qwen3's q_norm); not recorded without RoPE (GPT-2)
  KeyBeforeRope,     // [kv_heads, n, head_dim] likewise for the keys this forward writes
  AttentionProjected,  // [n, hidden] the attention block's output after o_proj (GPT-2: c_proj), bias included,
                       // before the residual add (and before Gemma 2's post-attention norm)
  LayerOutput,         // [n, hidden] the residual stream after the whole layer (attention and MLP added)
};

const char* probeName(Probe probe);

class ProbeSink {
 public:
  virtual ~ProbeSink() = default;
  virtual bool wants(Probe probe, int64_t layer) const = 0;
  // `value` is the live tensor; keep a clone if it must outlive the call.
  virtual void record(Probe probe, int64_t layer, const at::Tensor& value) = 0;
};

// Collects the attention weights and masks of every layer during one
// forward (the verify views: a session's, a capture's replay).
class AttentionRecorder : public ProbeSink {
 public:
  explicit AttentionRecorder(int64_t layers) : weights(static_cast<size_t>(layers)), masks(static_cast<size_t>(layers)) {}
  bool wants(Probe probe, int64_t) const override {
    return probe == Probe::AttentionWeights || probe == Probe::AttentionMask;
  }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    (probe == Probe::AttentionWeights ? weights : masks)[static_cast<size_t>(layer)] = value;
  }
  std::vector<at::Tensor> weights;  // per layer [heads, fed, keys]
  std::vector<at::Tensor> masks;    // per layer [fed, keys] bool
};

// Records only when a sink is present and wants the point.
inline void probe(ProbeSink* sink, Probe point, int64_t layer, const at::Tensor& value) {
  if (sink != nullptr && sink->wants(point, layer)) sink->record(point, layer, value);
}

}  // namespace kvscope
