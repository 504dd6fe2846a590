#include "core/bench/matmul_baseline.h"

#include <algorithm>

#include "core/model/dense.h"

namespace kvscope {
namespace {

bool isEmbedding(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "transformer.wte.weight";
}

}  // namespace

MatmulBaseline::MatmulBaseline(const CausalLM& model) {
  const ModelConfig& c = model.config();
  for (const auto& [name, tensor] : model.namedParameters()) {
    const bool matrix = tensor.dim() == 2 || isPanels(tensor);
    if (!matrix || name == "transformer.wpe.weight") continue;  // norms, biases, position table
    // The embedding is a row lookup; it is multiplied only as a tied lm_head.
    if (isEmbedding(name) && !c.tie_word_embeddings) continue;
    const bool in_out = c.arch == Architecture::Gpt2 && !isEmbedding(name) && name != "lm_head.weight";
    // libtorch's own best layout: row-major [out, in] (a copy of panels), in
    // float32 (a 16-bit weight widened: the bound of the widen-at-load path).
    weights_.push_back((in_out ? tensor.t() : denseMatrix(tensor).contiguous()).to(torch::kFloat32));
    bytes_ += static_cast<double>(tensor.numel()) * sizeof(float);
  }
  // The lm_head comes last in a forward (namedParameters lists a tied one first).
  if (c.tie_word_embeddings && !weights_.empty()) std::rotate(weights_.begin(), weights_.begin() + 1, weights_.end());
}

const at::Tensor& MatmulBaseline::inputFor(int64_t in, int64_t rows) const {
  at::Tensor& x = inputs_[{in, rows}];
  if (!x.defined()) x = torch::randn({rows, in}, weights_.front().options());  // [rows, in]
  return x;
}

void MatmulBaseline::prepare(int64_t rows) const {
  for (const at::Tensor& w : weights_) inputFor(w.size(1), rows);
}

void MatmulBaseline::run(int64_t rows) const {
  c10::InferenceMode guard;
  for (const at::Tensor& w : weights_) {
    const at::Tensor& x = inputFor(w.size(1), rows);
    if (rows == 1) torch::mv(w, x.select(0, 0));
    else torch::mm(x, w.t());
  }
}

}  // namespace kvscope
