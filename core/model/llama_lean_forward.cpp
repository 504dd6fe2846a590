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

#include "core/cache/kv_cache.h"
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
// check and copy what was stored) and attention's weights and mask (what a
// traced session keeps of every verify); a forward that wants any other
// point goes through the tensor path, whose tensors the probes are.
constexpr Probe kTensorPathProbes[] = {Probe::Query,         Probe::AttentionOutput,   Probe::LayerInput,
                                       Probe::QueryBeforeRope, Probe::KeyBeforeRope,   Probe::AttentionProjected,
                                       Probe::LayerOutput};

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

// Where a forward's new K/V rows sit in the q|k|v buffer: rows [first, first
// + n), each `width` floats, k from column k_column and v right after it.
struct NewRows {
  const float* qkv = nullptr;
  int64_t width = 0, k_column = 0, first = 0, n = 0, kv_heads = 0, head_dim = 0;
};

// Appends the new rows to the cache's own storage by copying them in place,
// and returns that storage for attention to read: no tensor call per layer.
CacheRowsView appendInPlace(KvCache& cache, int64_t layer, const NewRows& rows) {
  const KvCache::PlainLayer stored = cache.appendPlain(layer, rows.n);
  const int64_t D = rows.head_dim, kv_width = rows.kv_heads * D, first_stored = stored.length - rows.n;
  for (int64_t h = 0; h < rows.kv_heads; ++h) {
    for (int64_t r = 0; r < rows.n; ++r) {
      const float* k = rows.qkv + (rows.first + r) * rows.width + rows.k_column + h * D;
      const int64_t at = h * stored.head_stride + (first_stored + r) * stored.row_stride;
      std::copy_n(k, D, stored.k + at);
      std::copy_n(k + kv_width, D, stored.v + at);
    }
  }
  CacheRowsView view;
  view.k = stored.k;
  view.v = stored.v;
  view.k_head_stride = view.v_head_stride = stored.head_stride;
  view.k_row_stride = view.v_row_stride = stored.row_stride;
  view.kv_heads = rows.kv_heads;
  view.total = stored.length;
  view.keep = stored.keep;
  view.keep_head_stride = stored.keep_stride;
  view.keep_row_stride = 1;
  return view;
}

// What a sink wants of one sequence's attention in one layer: the mask, and
// the weights, which the kernel writes into a tensor made here and finish()
// hands over, both as causalAttention records them.
class AttentionRecording {
 public:
  AttentionRecording(ProbeSink* probes, int64_t layer, CacheAttentionRows& rows, int64_t total,
                     const AttentionOptions& options)
      : probes_(probes), layer_(layer) {
    if (probes == nullptr) return;
    if (probes->wants(Probe::AttentionMask, layer)) {
      probes->record(Probe::AttentionMask, layer, visibleKeys(rows.rows, total, options));  // [n, T]
    }
    if (probes->wants(Probe::AttentionWeights, layer)) {
      weights_ = torch::empty({rows.heads, rows.rows, total}, torch::kFloat32);  // [heads, n, T]
      rows.weights = weights_.data_ptr<float>();
    }
  }
  // After the attention: hands the weights it wrote to the sink.
  void finish() const {
    if (weights_.defined()) probes_->record(Probe::AttentionWeights, layer_, weights_);
  }

 private:
  ProbeSink* probes_;
  int64_t layer_;
  at::Tensor weights_;
};

}  // namespace

// One forward's rows in the workspace, found once per forward: every layer
// reuses them. Raw pointers, not ATen views: a view per buffer cost some
// 20 us per forward, a tenth of a small drafter's step.
struct LeanBuffers {
  int64_t rows = 0;                  // N
  float* residual = nullptr;         // [N, hidden]
  float* normed = nullptr;           // [N, hidden]
  float* projected = nullptr;        // [N, hidden]
  float* qkv = nullptr;              // [N, (heads + 2 kv_heads) * head_dim]
  float* merged = nullptr;           // [N, heads * head_dim]
  float* gate_up = nullptr;          // [N, 2 * intermediate]
  float* activated = nullptr;        // [N, intermediate]
  float* cos = nullptr;              // [N, head_dim]
  float* sin = nullptr;              // [N, head_dim]

  LeanBuffers(const ForwardWorkspace& ws, int64_t n, int64_t q_width, int64_t kv_width, int64_t kv_heads,
              int64_t head_dim)
      : rows(n),
        residual(ws.residualData()),
        normed(ws.normedData()),
        projected(ws.projectedData()),
        qkv(ws.qkvData()),
        merged(ws.mergedData()),
        gate_up(ws.gateUpData()),
        activated(ws.activatedData()),
        cos(ws.cosData()),
        sin(ws.sinData()),
        workspace_(&ws),
        q_width_(q_width),
        kv_width_(kv_width),
        kv_heads_(kv_heads),
        head_dim_(head_dim) {}

  // [kv_heads, N, head_dim] views of qkv's k and v columns, made only when a
  // forward records them or hands them to a cache it cannot write in place.
  at::Tensor k() const { return columns(q_width_); }
  at::Tensor v() const { return columns(q_width_ + kv_width_); }

 private:
  at::Tensor columns(int64_t first) const {
    return workspace_->qkv(rows).narrow(1, first, kv_width_).view({rows, kv_heads_, head_dim_}).transpose(0, 1);
  }
  const ForwardWorkspace* workspace_;
  int64_t q_width_, kv_width_, kv_heads_, head_dim_;
};

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

void LlamaModel::leanRotaryRows(const BatchRows& batch, ForwardWorkspace& ws, const LeanBuffers& b) const {
  const int64_t D = config_.head_dim;
  if (rope_.callDependent()) {  // longrope: the factor set is the call's, as the tensor path picks it
    for (size_t i = 0; i < batch.size(); ++i) {
      auto [c, s] = rope_.table(batch.positionsOf(i));  // [n_i, D] each
      const int64_t first = batch.offset(i), n = batch.count(i);
      at::from_blob(b.cos + first * D, {n, D}, at::kFloat).copy_(c);
      at::from_blob(b.sin + first * D, {n, D}, at::kFloat).copy_(s);
    }
    return;
  }
  int64_t end = 0;  // one past the largest position of the call
  for (size_t i = 0; i < batch.size(); ++i) end = std::max({end, batch[i].start_pos + batch[i].realCount(), int64_t{1}});
  if (ws.rotaryPositions() < end) {
    // Grown geometrically, up to the context: a decode step adds one position at a time.
    const int64_t positions = std::min(config_.contextLength(), std::max({end, 2 * ws.rotaryPositions(), int64_t{64}}));
    auto [c, s] = rope_.table(torch::arange(positions, torch::kInt64));  // [P, D] each
    ws.setRotaryTable(c, s);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int64_t r = 0; r < batch.count(i); ++r) {
      const int64_t row = batch.offset(i) + r, position = batch.positionOf(i, r);
      std::copy_n(ws.rotaryCos(position), D, b.cos + row * D);
      std::copy_n(ws.rotarySin(position), D, b.sin + row * D);
    }
  }
}

void LlamaModel::leanProjectQkv(const Layer& layer, const LeanBuffers& b) const {
  const int64_t N = b.rows, H = config_.hidden_size;
  if (layer.w_qkv.defined()) {  // fused: rows [q | k | v], straight into the buffer
    denseInto(b.normed, N, H, layer.w_qkv, layer.b_qkv, b.qkv);
    return;
  }
  // Parts in different layouts (a large q_proj column-major, k and v panels):
  // each product as the tensor path makes it, copied into its columns.
  const int64_t QD = config_.num_heads * config_.head_dim, KD = config_.num_kv_heads * config_.head_dim;
  const auto normed = at::from_blob(b.normed, {N, H}, at::kFloat);
  const auto qkv = at::from_blob(b.qkv, {N, QD + 2 * KD}, at::kFloat);
  qkv.narrow(1, 0, QD).copy_(dense(normed, layer.wq, layer.bq));
  qkv.narrow(1, QD, KD).copy_(dense(normed, layer.wk, layer.bk));
  qkv.narrow(1, QD + KD, KD).copy_(dense(normed, layer.wv, layer.bv));
}

void LlamaModel::leanAttention(int64_t index, const BatchRows& batch, ForwardWorkspace& ws, const LeanBuffers& b) const {
  const int64_t D = config_.head_dim, Hq = config_.num_heads, Hkv = config_.num_kv_heads;
  const int64_t QD = Hq * D, width = QD + 2 * Hkv * D;
  AttentionOptions layer_options;
  layer_options.scale = attentionScale(config_, index);
  layer_options.softcap = config_.attn_logit_softcap;
  layer_options.window = config_.windowOf(index);
  for (size_t i = 0; i < batch.size(); ++i) {
    KvCache* cache = batch[i].cache;
    ProbeSink* probes = batch[i].probes;
    const bool record_keys = probes != nullptr && probes->wants(Probe::Key, index);
    const bool record_values = probes != nullptr && probes->wants(Probe::Value, index);
    if (record_keys || record_values) {
      // A copy: the buffer is the next layer's, and a sink may keep what it is given.
      if (record_keys) probes->record(Probe::Key, index, batch.rowsOf(b.k(), i, 1).clone());  // [kv, n_i, D]
      if (record_values) probes->record(Probe::Value, index, batch.rowsOf(b.v(), i, 1).clone());
    }
    AttentionOptions options = layer_options;
    options.causal_among_new = cache == nullptr || cache->causalAmongNewRows();
    options.pad_rows = padRowsHidden(batch[i]);
    CacheAttentionRows rows;
    rows.q = b.qkv + batch.offset(i) * width;
    rows.q_stride = width;
    rows.out = b.merged + batch.offset(i) * QD;
    rows.out_stride = QD;
    rows.rows = batch.count(i);
    rows.heads = Hq;
    rows.head_dim = D;
    if (cache != nullptr && cache->plainAppendApplies()) {
      const NewRows fed{b.qkv, width, QD, batch.offset(i), batch.count(i), Hkv, D};
      const CacheRowsView view = appendInPlace(*cache, index, fed);
      const AttentionRecording recording(probes, index, rows, view.total, options);
      attendCacheRowsInto(rows, view, options, ws.scores());
      recording.finish();
      continue;
    }
    // Paged, another storage dtype, a fault's write order, or no cache: through the tensors.
    auto [keys, values] = keysAndValues(batch.rowsOf(b.k(), i, 1), batch.rowsOf(b.v(), i, 1), index, cache);  // [kv, T_i, D]
    if (cache != nullptr) options.keep = cache->keepMask(index);
    const AttentionRecording recording(probes, index, rows, keys.size(1), options);
    attendCacheInto(rows, keys, values, options, ws.scores());
    recording.finish();
  }
}

void LlamaModel::leanMlp(const Layer& layer, const LeanBuffers& b) const {
  const int64_t N = b.rows, H = config_.hidden_size, I = config_.intermediate_size;
  const bool gelu = config_.activation == "gelu_pytorch_tanh";
  if (layer.w_gate_up.defined()) {  // fused: rows [gate | up]
    denseInto(b.normed, N, H, layer.w_gate_up, layer.b_gate_up, b.gate_up);
    for (int64_t r = 0; r < N; ++r) {
      const float* row = b.gate_up + r * 2 * I;
      gatedActivation(row, row + I, b.activated + r * I, I, gelu);
    }
  } else {  // gate [N, I] then up [N, I] in the same buffer
    denseInto(b.normed, N, H, layer.w_gate, layer.b_gate, b.gate_up);
    denseInto(b.normed, N, H, layer.w_up, layer.b_up, b.gate_up + N * I);
    gatedActivation(b.gate_up, b.gate_up + N * I, b.activated, N * I, gelu);
  }
  denseInto(b.activated, N, I, layer.w_down, layer.b_down, b.projected);
}

void LlamaModel::leanBlock(const Layer& layer, int64_t index, const BatchRows& batch, ForwardWorkspace& ws,
                           const LeanBuffers& b) const {
  const int64_t N = b.rows, H = config_.hidden_size, D = config_.head_dim;
  const int64_t Hq = config_.num_heads, Hkv = config_.num_kv_heads, width = (Hq + 2 * Hkv) * D;
  const bool gemma = config_.family == DecoderFamily::Gemma2;
  const NormGain gain = gemma ? NormGain::OffsetFromOne : NormGain::Scale;
  const double eps = config_.norm_eps;

  rmsNormRows(b.residual, b.normed, N, H, H, floats(layer.input_norm), eps, gain);
  leanProjectQkv(layer, b);
  for (int64_t r = 0; r < N; ++r) {
    float* q = b.qkv + r * width;
    float* k = q + Hq * D;
    if (config_.qk_norm) {  // Qwen3: per head, over head_dim, before RoPE
      rmsNormRows(q, q, Hq, D, D, floats(layer.q_norm), eps, gain);
      rmsNormRows(k, k, Hkv, D, D, floats(layer.k_norm), eps, gain);
    }
    rotateHeadsInPlace(q, Hq, D, b.cos + r * D, b.sin + r * D);
    rotateHeadsInPlace(k, Hkv, D, b.cos + r * D, b.sin + r * D);
  }
  leanAttention(index, batch, ws, b);
  denseInto(b.merged, N, Hq * D, layer.wo, layer.bo, b.projected);
  if (gemma) rmsNormRows(b.projected, b.projected, N, H, H, floats(layer.post_attention_norm), eps, gain);
  addInPlace(b.residual, b.projected, N * H);

  rmsNormRows(b.residual, b.normed, N, H, H, floats(gemma ? layer.pre_ff_norm : layer.post_attention_norm), eps, gain);
  leanMlp(layer, b);
  if (gemma) rmsNormRows(b.projected, b.projected, N, H, H, floats(layer.post_ff_norm), eps, gain);
  addInPlace(b.residual, b.projected, N * H);
}

at::Tensor LlamaModel::leanLogits(const BatchRows& batch, const LeanBuffers& b) const {
  const int64_t H = config_.hidden_size;
  const NormGain gain = config_.family == DecoderFamily::Gemma2 ? NormGain::OffsetFromOne : NormGain::Scale;
  int64_t rows = 0;  // the rows each sequence wants logits of, in batch order (BatchRows::logitRows)
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t wanted = batch.logitCount(i), first = batch.firstLogitRow(i);
    rmsNormRows(b.residual + first * H, b.normed + rows * H, wanted, H, H, floats(final_norm_), config_.norm_eps, gain);
    rows += wanted;
  }
  auto logits = at::empty({rows, config_.vocab_size}, options_);  // [rows, vocab]: the caller's to keep
  if (rows == 0) return logits;
  denseInto(b.normed, rows, H, lm_head_, at::Tensor(), floats(logits));
  if (config_.final_logit_softcap > 0) softcapInPlace(floats(logits), logits.numel(), config_.final_logit_softcap);
  return logits;
}

at::Tensor LlamaModel::leanForward(const BatchRows& batch) const {
  const int64_t N = batch.total(), H = config_.hidden_size, D = config_.head_dim;
  ForwardWorkspace::Lease ws(workspace_, workspace_mutex_, workspaceShape());
  ws->reserve(N);
  const LeanBuffers b(*ws, N, config_.num_heads * D, config_.num_kv_heads * D, config_.num_kv_heads, D);
  const at::Tensor tokens = batch.tokens().contiguous();  // [N]
  denseRowsInto(embed_, tokens.data_ptr<int64_t>(), N, b.residual);  // [N, hidden]
  if (config_.family == DecoderFamily::Gemma2) {
    // sqrt(hidden) rounded to float32 first, as the tensor path does.
    const float scale = static_cast<float>(std::sqrt(static_cast<double>(H)));
    for (int64_t i = 0; i < N * H; ++i) b.residual[i] *= scale;
  }
  leanRotaryRows(batch, *ws, b);
  for (size_t i = 0; i < layers_.size(); ++i) leanBlock(layers_[i], static_cast<int64_t>(i), batch, *ws, b);
  return leanLogits(batch, b);
}

}  // namespace kvscope
