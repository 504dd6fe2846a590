#pragma once
// The buffers a lean forward (core/model/llama_model.h) writes its
// activations into, kept by the model and reused from one forward to the
// next, so a decode step allocates nothing for them: every buffer holds
// `rows` rows and grows (never shrinks) when a forward brings more. A model
// may be run from two threads at once (the GUI's engine and a benchmark);
// the one that finds the model's workspace taken uses a workspace of its own
// for that forward (ForwardWorkspace::Lease).
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kvscope {

// The widths of one forward's buffers, in floats per row.
struct WorkspaceShape {
  int64_t hidden = 0;
  int64_t qkv = 0;           // (heads + 2 kv_heads) * head_dim
  int64_t attention = 0;     // heads * head_dim
  int64_t intermediate = 0;  // the MLP's width
  int64_t rotary = 0;        // head_dim: one cos and one sin row per token
};

class ForwardWorkspace {
 public:
  explicit ForwardWorkspace(const WorkspaceShape& shape) : shape_(shape) {}

  // Makes every buffer hold at least `rows` rows.
  void reserve(int64_t rows);

  // [rows, width] float32 row-major views (valid until the next reserve()).
  at::Tensor residual(int64_t rows) const { return view(residual_, rows); }      // [rows, hidden]
  at::Tensor normed(int64_t rows) const { return view(normed_, rows); }          // [rows, hidden]
  at::Tensor projected(int64_t rows) const { return view(projected_, rows); }    // [rows, hidden]
  at::Tensor qkv(int64_t rows) const { return view(qkv_, rows); }                // [rows, qkv]
  at::Tensor merged(int64_t rows) const { return view(merged_, rows); }          // [rows, attention]
  at::Tensor gateUp(int64_t rows) const { return view(gate_up_, rows); }         // [rows, 2 * intermediate]
  at::Tensor activated(int64_t rows) const { return view(activated_, rows); }    // [rows, intermediate]
  at::Tensor cos(int64_t rows) const { return view(cos_, rows); }                // [rows, head_dim]
  at::Tensor sin(int64_t rows) const { return view(sin_, rows); }                // [rows, head_dim]
  // The same buffers' first floats: a forward that knows its widths reads
  // and writes them through these, without a tensor call per buffer.
  float* residualData() const { return residual_.data_ptr<float>(); }
  float* normedData() const { return normed_.data_ptr<float>(); }
  float* projectedData() const { return projected_.data_ptr<float>(); }
  float* qkvData() const { return qkv_.data_ptr<float>(); }
  float* mergedData() const { return merged_.data_ptr<float>(); }
  float* gateUpData() const { return gate_up_.data_ptr<float>(); }
  float* activatedData() const { return activated_.data_ptr<float>(); }
  float* cosData() const { return cos_.data_ptr<float>(); }
  float* sinData() const { return sin_.data_ptr<float>(); }
  // Attention's per-head score rows, grown by attendCacheInto.
  std::vector<float>& scores() { return scores_; }
  // The model's rotary table over positions 0 .. rotaryPositions() - 1
  // ([P, head_dim] each), kept while it covers the positions asked for.
  int64_t rotaryPositions() const { return rotary_cos_.defined() ? rotary_cos_.size(0) : 0; }
  void setRotaryTable(at::Tensor cos, at::Tensor sin);
  const float* rotaryCos(int64_t position) const { return rotary_cos_.data_ptr<float>() + position * shape_.rotary; }
  const float* rotarySin(int64_t position) const { return rotary_sin_.data_ptr<float>() + position * shape_.rotary; }

  // The model's workspace while this thread holds it, else one of its own.
  class Lease {
   public:
    Lease(std::unique_ptr<ForwardWorkspace>& shared, std::mutex& mutex, const WorkspaceShape& shape);
    ForwardWorkspace& operator*() { return *workspace_; }
    ForwardWorkspace* operator->() { return workspace_; }

   private:
    std::unique_lock<std::mutex> lock_;
    std::unique_ptr<ForwardWorkspace> own_;
    ForwardWorkspace* workspace_ = nullptr;
  };

 private:
  static at::Tensor view(const at::Tensor& buffer, int64_t rows) { return buffer.narrow(0, 0, rows); }

  WorkspaceShape shape_;
  int64_t rows_ = 0;
  at::Tensor residual_, normed_, projected_, qkv_, merged_, gate_up_, activated_, cos_, sin_;
  std::vector<float> scores_;
  at::Tensor rotary_cos_, rotary_sin_;  // [P, head_dim] float32, contiguous
};

}  // namespace kvscope
