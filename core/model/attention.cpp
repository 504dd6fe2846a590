#include "core/model/attention.h"

#include <cmath>
#include <limits>

namespace kvscope {

double attentionScale(const ModelConfig& config, int64_t layer) {
  const double inverse_sqrt = 1.0 / std::sqrt(static_cast<double>(config.head_dim));
  if (config.arch == Architecture::Gpt2) {
    const double scale = config.scale_attn_weights ? inverse_sqrt : 1.0;
    return config.scale_attn_by_inverse_layer_idx ? scale / static_cast<double>(layer + 1) : scale;
  }
  return config.attention_scale > 0 ? config.attention_scale : inverse_sqrt;
}

std::pair<at::Tensor, at::Tensor> keysAndValues(const at::Tensor& k, const at::Tensor& v, int64_t layer,
                                                KvCache* cache) {
  if (cache == nullptr) return {k, v};
  cache->append(layer, k, v);
  // A half-precision cache is read back in the compute dtype, as real
  // engines that store fp16 K/V do.
  return {cache->keys(layer).to(k.scalar_type()), cache->values(layer).to(v.scalar_type())};
}

namespace {

// [n, T] bool, true where query i (at position T - n + i) may not see key j.
at::Tensor hiddenKeys(int64_t n, int64_t total, const AttentionOptions& options) {
  // Causal mask: query i may see key j iff j <= T - n + i.
  auto query_index = torch::arange(n, torch::kInt64).unsqueeze(1) + (total - n);  // [n, 1]
  auto key_index = torch::arange(total, torch::kInt64).unsqueeze(0);              // [1, T]
  auto hidden = key_index > query_index;                                          // [n, T]
  if (!options.causal_among_new) hidden = hidden & (key_index < total - n);       // new rows all visible
  if (options.window > 0) hidden = hidden | (key_index <= query_index - options.window);  // left the window
  if (options.pad_rows > 0) hidden = hidden | ((key_index < options.pad_rows) & (query_index >= options.pad_rows));
  return hidden;
}

// hiddenKeys, built once for all layers of a short forward: a verify pass
// asks every layer for the same mask, and building it is five tensor
// operations per layer (about a tenth of a 5-token forward of the bundled
// target). Long forwards (a prefill) build theirs, so no large mask is kept.
at::Tensor sharedHiddenKeys(int64_t n, int64_t total, const AttentionOptions& options) {
  constexpr int64_t kShareUpTo = 16;
  if (n > kShareUpTo) return hiddenKeys(n, total, options);
  struct Key {
    int64_t n = -1, total = -1, window = 0, pad_rows = 0;
    bool causal_among_new = true;
    bool operator==(const Key& o) const {
      return n == o.n && total == o.total && window == o.window && pad_rows == o.pad_rows &&
             causal_among_new == o.causal_among_new;
    }
  };
  thread_local Key last;
  thread_local at::Tensor mask;
  const Key key{n, total, options.window, options.pad_rows, options.causal_among_new};
  if (!(key == last) || !mask.defined()) {
    mask = hiddenKeys(n, total, options);
    last = key;
  }
  return mask;
}

// Sets scores [kv, g, n, T] (a fresh tensor: written in place, no copy) to
// -inf where a query may not see a key.
void maskScores(at::Tensor& scores, int64_t n, int64_t total, const AttentionOptions& options, int64_t layer,
                ProbeSink* probes) {
  auto hidden = sharedHiddenKeys(n, total, options);  // [n, T]
  if (probes != nullptr && probes->wants(Probe::AttentionMask, layer)) {
    probe(probes, Probe::AttentionMask, layer, visibleKeys(n, total, options));
  }
  scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
}

}  // namespace

at::Tensor visibleKeys(int64_t n, int64_t total, const AttentionOptions& options) {
  // Shared as the hidden mask it negates is: every layer of a verify records
  // the same mask, and a logical_not per layer was 4% of a traced session.
  thread_local at::Tensor negated, visible;
  const at::Tensor hidden = sharedHiddenKeys(n, total, options);
  if (!visible.defined() || !hidden.is_same(negated)) {
    visible = hidden.logical_not();
    negated = hidden;
  }
  return visible;
}

at::Tensor causalAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const AttentionOptions& options, int64_t layer, ProbeSink* probes) {
  const int64_t heads = q.size(0), n = q.size(1), head_dim = q.size(2);
  const int64_t kv_heads = keys.size(0), total = keys.size(1);
  const int64_t group = heads / kv_heads;

  // Group query heads by the kv head they share and multiply each group with
  // its K in one batched product: broadcasting K over the group (matmul with
  // unsqueeze) would copy the whole cache once per query head every step.
  auto grouped_q = q.reshape({kv_heads, group * n, head_dim});  // [kv, g * n, D]
  auto scores = torch::bmm(grouped_q, keys.transpose(1, 2)).view({kv_heads, group, n, total}) * options.scale;  // [kv, g, n, T]
  if (options.softcap > 0) scores = (scores / options.softcap).tanh() * options.softcap;

  // One causal query with no window sees every key: no mask to build
  // (five tensor operations per layer and step that would hide nothing).
  const bool sees_all = n == 1 && options.window <= 0 && options.causal_among_new && options.pad_rows <= 0;
  if (!sees_all || (probes != nullptr && probes->wants(Probe::AttentionMask, layer))) {
    maskScores(scores, n, total, options, layer, probes);
  }
  // Rows an eviction policy removed: hidden from every query of their kv head
  // (the fast path above included). The row that a query writes is always
  // kept, so no query is left with nothing to attend to.
  if (options.keep.defined()) {
    auto removed = options.keep.logical_not().view({kv_heads, 1, 1, total});  // [kv, 1, 1, T]
    scores.masked_fill_(removed, -std::numeric_limits<float>::infinity());
  }
  auto weights = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());  // [kv, g, n, T]
  auto output = torch::bmm(weights.reshape({kv_heads, group * n, total}), values);  // [kv, g * n, D]
  auto per_head_weights = weights.reshape({heads, n, total});
  auto per_head_output = output.reshape({heads, n, head_dim});
  probe(probes, Probe::AttentionWeights, layer, per_head_weights);
  probe(probes, Probe::AttentionOutput, layer, per_head_output);
  return per_head_output;
}

int64_t padRowsHidden(const SequenceForward& sequence) {
  if (sequence.cache == nullptr) return sequence.pads.before;
  if (!sequence.cache->masksPadding()) return 0;
  return sequence.cache->padRows() + sequence.pads.before;
}

at::Tensor attendEachSequence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const BatchRows& batch,
                              int64_t layer, const AttentionOptions& layer_options) {
  std::vector<at::Tensor> outputs;  // per sequence [heads, n_i, head_dim]
  for (size_t i = 0; i < batch.size(); ++i) {
    KvCache* cache = batch[i].cache;
    // k and v are transposed views ([kv_heads, n, D] over [n, kv_heads, D]); the
    // cache's append copies them as they are, so no contiguous copy first
    // (two copies per layer on a verify pass; free only for n = 1).
    auto [keys, values] = keysAndValues(batch.rowsOf(k, i, 1), batch.rowsOf(v, i, 1), layer, cache);  // [kv_heads, T_i, D]
    AttentionOptions options = layer_options;
    options.causal_among_new = cache == nullptr || cache->causalAmongNewRows();
    if (cache != nullptr) options.keep = cache->keepMask(layer);  // rows an eviction policy removed
    options.pad_rows = padRowsHidden(batch[i]);
    outputs.push_back(causalAttention(batch.rowsOf(q, i, 1), keys, values, options, layer, batch[i].probes));
  }
  return BatchRows::join(outputs, 1);  // [heads, N, head_dim]
}

}  // namespace kvscope
