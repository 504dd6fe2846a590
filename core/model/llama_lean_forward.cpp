// LlamaModel's lean forward (declared in core/model/llama_model.h): the
// decode and verify path of every Llama-family model for up to 16 rows.
//
// Why: the bundled target's decode step is about 9.5 MFLOP over 9.5 MB of
// weights, and its tensor path made some 40 ATen operations per layer, each
// a dispatch and often an allocation (2-5 us), so the step cost several
// times its arithmetic, and a drafter or a verify of a few rows cost nearly
// a full step whatever its size. Here each layer is: one pass of RMSNorm,
// the fused q|k|v product straight into a reused buffer, the rotary
// embedding in place over q and k from a table kept across forwards, the
// cache append, attention over the cache into the merged heads o_proj reads,
// and the MLP (gate|up product, SiLU * up in one pass, down) into buffers
// of the model's workspace. The products are the few-row kernel's, in the
// layout and order dense() uses, so they are bit for bit the tensor path's;
// RMSNorm's sum, the activation and attention's softmax and sums round in
// another order (LeanForward tests bound the logits against the tensor path).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "core/model/attention.h"
#include "core/model/cache_attention.h"
#include "core/model/dense.h"
#include "core/model/few_rows.h"
#include "core/model/llama_model.h"
#include "core/model/row_kernels.h"

namespace kvscope {
namespace {

std::atomic<bool> lean_enabled{true};

// The points the lean forward does not record. It records Key and Value
// (the rows it hands the cache: every session's tracked cache keeps them to
// check and copy what was stored); a forward that wants any other point goes
// through the tensor path, whose tensors the probes are.
constexpr Probe kTensorPathProbes[] = {Probe::Query,           Probe::AttentionWeights, Probe::AttentionOutput,
                                       Probe::AttentionMask,   Probe::LayerInput,       Probe::QueryBeforeRope,
                                       Probe::KeyBeforeRope,   Probe::AttentionProjected, Probe::LayerOutput};

bool wantsTensorPathProbe(const ProbeSink* sink, int64_t layers) {
  if (sink == nullptr) return false;
  for (Probe point : kTensorPathProbes) {
    for (int64_t layer = 0; layer < layers; ++layer) {
      if (sink->wants(point, layer)) return true;
    }
  }
  return false;
}

float* floats(const at::Tensor& t) { return t.data_ptr<float>(); }

}  // namespace

void setLeanForwardEnabled(bool enabled) { lean_enabled = enabled; }
bool leanForwardEnabled() { return lean_enabled; }

bool LlamaModel::leanForwardApplies(const BatchRows& batch) const {
  if (!leanForwardEnabled() || batch.total() > kFewRowsMax) return false;
  if (options_.dtype() != at::kFloat || !options_.device().is_cpu()) return false;
  if (final_norm_.scalar_type() != at::kFloat || !final_norm_.device().is_cpu()) return false;
  if (at::GradMode::is_enabled() && embed_.requires_grad()) return false;  // training needs autograd's graph
  for (size_t i = 0; i < batch.size(); ++i) {
    if (wantsTensorPathProbe(batch[i].probes, config_.num_layers)) return false;
  }
  return true;
}

WorkspaceShape LlamaModel::workspaceShape() const {
  const int64_t D = config_.head_dim;
  WorkspaceShape shape;
  shape.hidden = config_.hidden_size;
  shape.attention = config_.num_heads * D;
  shape.qkv = shape.attention + 2 * config_.num_kv_heads * D;
  shape.intermediate = config_.intermediate_size;
  shape.rotary = D;
  return shape;
}

void LlamaModel::leanRotaryRows(const BatchRows& batch, ForwardWorkspace& ws) const {
  const int64_t D = config_.head_dim, N = batch.total();
  float* cos = floats(ws.cos(N));
  float* sin = floats(ws.sin(N));
  if (rope_.callDependent()) {  // longrope: the factor set is the call's, as the tensor path picks it
    for (size_t i = 0; i < batch.size(); ++i) {
      auto [c, s] = rope_.table(batch.positionsOf(i));  // [n_i, D] each
      const int64_t first = batch.offset(i), n = batch.count(i);
      at::from_blob(cos + first * D, {n, D}, at::kFloat).copy_(c);
      at::from_blob(sin + first * D, {n, D}, at::kFloat).copy_(s);
    }
    return;
  }
  int64_t end = 0;  // one past the largest position of the call
  for (size_t i = 0; i < batch.size(); ++i) end = std::max(end, batch[i].start_pos + batch.count(i));
  if (ws.rotaryPositions() < end) {
    // Grown geometrically, up to the context: a decode step adds one position at a time.
    const int64_t positions = std::min(config_.contextLength(), std::max({end, 2 * ws.rotaryPositions(), int64_t{64}}));
    auto [c, s] = rope_.table(torch::arange(positions, torch::kInt64));  // [P, D] each
    ws.setRotaryTable(c, s);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int64_t r = 0; r < batch.count(i); ++r) {
      const int64_t row = batch.offset(i) + r, position = batch[i].start_pos + r;
      std::copy_n(ws.rotaryCos(position), D, cos + row * D);
      std::copy_n(ws.rotarySin(position), D, sin + row * D);
    }
  }
}

void LlamaModel::leanProjectQkv(const Layer& layer, const at::Tensor& normed, const at::Tensor& qkv) const {
  if (layer.w_qkv.defined()) {  // fused: rows [q | k | v], straight into the buffer
    denseInto(normed, layer.w_qkv, layer.b_qkv, floats(qkv));
    return;
  }
  // Parts in different layouts (a large q_proj column-major, k and v panels):
  // each product as the tensor path makes it, copied into its columns.
  const int64_t QD = config_.num_heads * config_.head_dim, KD = config_.num_kv_heads * config_.head_dim;
  qkv.narrow(1, 0, QD).copy_(dense(normed, layer.wq, layer.bq));
  qkv.narrow(1, QD, KD).copy_(dense(normed, layer.wk, layer.bk));
  qkv.narrow(1, QD + KD, KD).copy_(dense(normed, layer.wv, layer.bv));
}

void LlamaModel::leanAttention(int64_t index, const BatchRows& batch, ForwardWorkspace& ws) const {
  const int64_t N = batch.total(), D = config_.head_dim, Hq = config_.num_heads, Hkv = config_.num_kv_heads;
  const int64_t QD = Hq * D, KD = Hkv * D, width = QD + 2 * KD;
  const at::Tensor qkv = ws.qkv(N);  // [N, QD + 2 KD]
  // [kv_heads, N, D] views of the k and v columns, as the tensor path hands the cache.
  const at::Tensor k = qkv.narrow(1, QD, KD).view({N, Hkv, D}).transpose(0, 1);
  const at::Tensor v = qkv.narrow(1, QD + KD, KD).view({N, Hkv, D}).transpose(0, 1);
  AttentionOptions layer_options;
  layer_options.scale = attentionScale(config_, index);
  layer_options.softcap = config_.attn_logit_softcap;
  layer_options.window = config_.windowOf(index);
  for (size_t i = 0; i < batch.size(); ++i) {
    KvCache* cache = batch[i].cache;
    const at::Tensor k_rows = batch.rowsOf(k, i, 1), v_rows = batch.rowsOf(v, i, 1);  // [kv, n_i, D]
    // A copy: the buffer is the next layer's, and a sink may keep what it is given.
    if (batch[i].probes != nullptr && batch[i].probes->wants(Probe::Key, index)) batch[i].probes->record(Probe::Key, index, k_rows.clone());
    if (batch[i].probes != nullptr && batch[i].probes->wants(Probe::Value, index)) batch[i].probes->record(Probe::Value, index, v_rows.clone());
    auto [keys, values] = keysAndValues(k_rows, v_rows, index, cache);  // [kv, T_i, D]
    AttentionOptions options = layer_options;
    options.causal_among_new = cache == nullptr || cache->causalAmongNewRows();
    if (cache != nullptr) options.keep = cache->keepMask(index);
    CacheAttentionRows rows;
    rows.q = floats(qkv) + batch.offset(i) * width;
    rows.q_stride = width;
    rows.out = floats(ws.merged(N)) + batch.offset(i) * QD;
    rows.out_stride = QD;
    rows.rows = batch.count(i);
    rows.heads = Hq;
    rows.head_dim = D;
    attendCacheInto(rows, keys, values, options, ws.scores());
  }
}

void LlamaModel::leanMlp(const Layer& layer, const at::Tensor& normed, ForwardWorkspace& ws) const {
  const int64_t N = normed.size(0), I = config_.intermediate_size;
  float* gate_up = floats(ws.gateUp(N));
  float* activated = floats(ws.activated(N));
  const bool gelu = config_.activation == "gelu_pytorch_tanh";
  if (layer.w_gate_up.defined()) {  // fused: rows [gate | up]
    denseInto(normed, layer.w_gate_up, layer.b_gate_up, gate_up);
    for (int64_t r = 0; r < N; ++r) gatedActivation(gate_up + r * 2 * I, gate_up + r * 2 * I + I, activated + r * I, I, gelu);
  } else {  // gate [N, I] then up [N, I] in the same buffer
    denseInto(normed, layer.w_gate, layer.b_gate, gate_up);
    denseInto(normed, layer.w_up, layer.b_up, gate_up + N * I);
    gatedActivation(gate_up, gate_up + N * I, activated, N * I, gelu);
  }
  denseInto(ws.activated(N), layer.w_down, layer.b_down, floats(ws.projected(N)));
}

void LlamaModel::leanBlock(const Layer& layer, int64_t index, const BatchRows& batch, ForwardWorkspace& ws) const {
  const int64_t N = batch.total(), H = config_.hidden_size, D = config_.head_dim;
  const int64_t Hq = config_.num_heads, Hkv = config_.num_kv_heads, width = (Hq + 2 * Hkv) * D;
  const bool gemma = config_.family == DecoderFamily::Gemma2;
  const NormGain gain = gemma ? NormGain::OffsetFromOne : NormGain::Scale;
  const double eps = config_.norm_eps;
  float* x = floats(ws.residual(N));
  float* normed = floats(ws.normed(N));
  float* projected = floats(ws.projected(N));
  float* qkv = floats(ws.qkv(N));
  const float* cos = floats(ws.cos(N));
  const float* sin = floats(ws.sin(N));

  rmsNormRows(x, normed, N, H, H, floats(layer.input_norm), eps, gain);
  leanProjectQkv(layer, ws.normed(N), ws.qkv(N));
  for (int64_t r = 0; r < N; ++r) {
    float* q = qkv + r * width;
    float* k = q + Hq * D;
    if (config_.qk_norm) {  // Qwen3: per head, over head_dim, before RoPE
      rmsNormRows(q, q, Hq, D, D, floats(layer.q_norm), eps, gain);
      rmsNormRows(k, k, Hkv, D, D, floats(layer.k_norm), eps, gain);
    }
    rotateHeadsInPlace(q, Hq, D, cos + r * D, sin + r * D);
    rotateHeadsInPlace(k, Hkv, D, cos + r * D, sin + r * D);
  }
  leanAttention(index, batch, ws);
  denseInto(ws.merged(N), layer.wo, layer.bo, projected);
  if (gemma) rmsNormRows(projected, projected, N, H, H, floats(layer.post_attention_norm), eps, gain);
  addInPlace(x, projected, N * H);

  rmsNormRows(x, normed, N, H, H, floats(gemma ? layer.pre_ff_norm : layer.post_attention_norm), eps, gain);
  leanMlp(layer, ws.normed(N), ws);
  if (gemma) rmsNormRows(projected, projected, N, H, H, floats(layer.post_ff_norm), eps, gain);
  addInPlace(x, projected, N * H);
}

at::Tensor LlamaModel::leanLogits(const BatchRows& batch, ForwardWorkspace& ws) const {
  const int64_t N = batch.total(), H = config_.hidden_size;
  const NormGain gain = config_.family == DecoderFamily::Gemma2 ? NormGain::OffsetFromOne : NormGain::Scale;
  const float* x = floats(ws.residual(N));
  float* normed = floats(ws.normed(N));
  int64_t rows = 0;  // the rows each sequence wants logits of, in batch order (BatchRows::logitRows)
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t wanted = batch.logitCount(i), first = batch.offset(i) + batch.count(i) - wanted;
    rmsNormRows(x + first * H, normed + rows * H, wanted, H, H, floats(final_norm_), config_.norm_eps, gain);
    rows += wanted;
  }
  auto logits = at::empty({rows, config_.vocab_size}, options_);  // [rows, vocab]: the caller's to keep
  if (rows == 0) return logits;
  denseInto(ws.normed(rows), lm_head_, at::Tensor(), floats(logits));
  if (config_.final_logit_softcap > 0) softcapInPlace(floats(logits), logits.numel(), config_.final_logit_softcap);
  return logits;
}

at::Tensor LlamaModel::leanForward(const BatchRows& batch) const {
  const int64_t N = batch.total(), H = config_.hidden_size;
  ForwardWorkspace::Lease ws(workspace_, workspace_mutex_, workspaceShape());
  ws->reserve(N);
  const at::Tensor tokens = batch.tokens().contiguous();  // [N]
  float* x = floats(ws->residual(N));
  denseRowsInto(embed_, tokens.data_ptr<int64_t>(), N, x);  // [N, hidden]
  if (config_.family == DecoderFamily::Gemma2) {
    // sqrt(hidden) rounded to float32 first, as the tensor path does.
    const float scale = static_cast<float>(std::sqrt(static_cast<double>(H)));
    for (int64_t i = 0; i < N * H; ++i) x[i] *= scale;
  }
  leanRotaryRows(batch, *ws);
  for (size_t i = 0; i < layers_.size(); ++i) leanBlock(layers_[i], static_cast<int64_t>(i), batch, *ws);
  return leanLogits(batch, *ws);
}

}  // namespace kvscope
