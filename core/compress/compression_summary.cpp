#include "core/compress/compression_summary.h"

#include <string>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

const char* rowFateName(RowFate fate) {
  switch (fate) {
    case RowFate::Kept: return "kept";
    case RowFate::Evicted: return "evicted";
    case RowFate::EvictedDecoding: return "evicted while decoding";
    case RowFate::Demoted: return "demoted";
  }
  return "?";
}

namespace {

// Appends a float32 tensor of `count` elements to `out`, checking its size.
void appendFloats(std::vector<float>& out, const at::Tensor& t, int64_t count, const char* what) {
  require(t.defined() && t.numel() == count, std::string("compression summary: ") + what + " has " +
                                                 std::to_string(t.defined() ? t.numel() : 0) + " elements, expected " +
                                                 std::to_string(count));
  const auto flat = t.to(torch::kFloat32).contiguous();
  out.insert(out.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + count);
}

// 1 where the keep mask ([kv, T, D] bool) is false: the entries pruning zeroed.
void appendZeroed(std::vector<uint8_t>& out, const at::Tensor& keep, int64_t count) {
  require(keep.defined() && keep.numel() == count, "compression summary: a pruning mask does not match the cache");
  const auto zeroed = keep.logical_not().to(torch::kUInt8).contiguous();
  out.insert(out.end(), zeroed.data_ptr<uint8_t>(), zeroed.data_ptr<uint8_t>() + count);
}

void copyMetrics(CompressionSummary& s, const CompressionResult& r) {
  s.layer_budgets = r.layer_budgets;
  s.steps = r.steps;
  s.kl_mean = r.kl_mean;
  s.kl_max = r.kl_max;
  s.top1_agreement = r.top1_agreement;
  s.attention_mass = r.attention_mass;
  s.perplexity_full = r.perplexity_full;
  s.perplexity_compressed = r.perplexity_compressed;
  s.bytes_full = r.bytes_full;
  s.bytes_kept = r.bytes_kept;
  s.pruned_k = r.pruned_k;
  s.pruned_v = r.pruned_v;
}

// Every row starts Evicted; the kept lists say which stayed; the removal
// records say which of those were demoted or went during decoding.
void fillFates(CompressionSummary& s, const CompressionResult& r) {
  const size_t per_layer = static_cast<size_t>(s.kv_heads * s.rows);
  s.fates.assign(static_cast<size_t>(s.layers) * per_layer, RowFate::Evicted);
  require(static_cast<int64_t>(r.kept.size()) == s.layers, "compression summary: kept positions per layer missing");
  for (int64_t l = 0; l < s.layers; ++l) {
    require(static_cast<int64_t>(r.kept[l].size()) == s.kv_heads, "compression summary: kept positions per kv head missing");
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      for (int64_t p : r.kept[l][h]) {
        if (p >= 0 && p < s.rows) s.fates[(l * s.kv_heads + h) * s.rows + p] = RowFate::Kept;
      }
    }
  }
  for (const RemovedRow& removed : r.removed) {
    if (!s.contains(removed.layer, removed.kv_head)) continue;
    if (removed.step >= 0) ++s.rows_evicted_decoding;
    if (removed.position < 0 || removed.position >= s.rows) continue;  // a decoded row (tova)
    RowFate& fate = s.fates[(removed.layer * s.kv_heads + removed.kv_head) * s.rows + removed.position];
    if (removed.step >= 0) fate = RowFate::EvictedDecoding;
    else if (r.demoted > 0 && fate == RowFate::Kept) fate = RowFate::Demoted;  // still read, at low precision
  }
  for (RowFate fate : s.fates) s.rows_evicted += fate == RowFate::Evicted ? 1 : 0;
}

}  // namespace

bool CompressionSummary::contains(int64_t layer, int64_t kv_head) const {
  return layer >= 0 && layer < layers && kv_head >= 0 && kv_head < kv_heads;
}

RowFate CompressionSummary::fate(int64_t layer, int64_t kv_head, int64_t row) const {
  if (!contains(layer, kv_head) || row < 0 || row >= rows) return RowFate::Kept;
  return fates[static_cast<size_t>((layer * kv_heads + kv_head) * rows + row)];
}

float CompressionSummary::score(int64_t layer, int64_t kv_head, int64_t row) const {
  if (!hasScores() || !contains(layer, kv_head) || row < 0 || row >= rows) return 0.0f;
  return scores[static_cast<size_t>((layer * kv_heads + kv_head) * rows + row)];
}

float CompressionSummary::entry(bool of_values, int64_t layer, int64_t kv_head, int64_t row, int64_t channel) const {
  if (!hasCache() || !contains(layer, kv_head) || row < 0 || row >= rows || channel < 0 || channel >= head_dim) return 0.0f;
  const auto& source = of_values ? values : keys;
  return source[static_cast<size_t>(((layer * kv_heads + kv_head) * rows + row) * head_dim + channel)];
}

bool CompressionSummary::zeroed(bool of_values, int64_t layer, int64_t kv_head, int64_t row, int64_t channel) const {
  if (!hasPruning() || !contains(layer, kv_head) || row < 0 || row >= rows || channel < 0 || channel >= head_dim) return false;
  const auto& source = of_values ? v_zeroed : k_zeroed;
  return source[static_cast<size_t>(((layer * kv_heads + kv_head) * rows + row) * head_dim + channel)] != 0;
}

float CompressionSummary::outputError(int64_t layer, int64_t head) const {
  if (layer < 0 || layer >= layers || head < 0 || head >= heads || output_error.empty()) return 0.0f;
  return output_error[static_cast<size_t>(layer * heads + head)];
}

std::vector<int64_t> CompressionSummary::removedPositions(int64_t layer, int64_t kv_head) const {
  std::vector<int64_t> positions;
  for (int64_t r = 0; r < rows && contains(layer, kv_head); ++r) {
    const RowFate f = fate(layer, kv_head, r);
    if (f == RowFate::Evicted || f == RowFate::EvictedDecoding) positions.push_back(r);
  }
  return positions;
}

int64_t CompressionSummary::zeroedEntries(bool of_values, int64_t layer, int64_t kv_head) const {
  if (!hasPruning() || !contains(layer, kv_head)) return 0;
  const auto& source = of_values ? v_zeroed : k_zeroed;
  const size_t begin = static_cast<size_t>((layer * kv_heads + kv_head) * rows * head_dim);
  int64_t count = 0;
  for (size_t i = begin; i < begin + static_cast<size_t>(rows * head_dim); ++i) count += source[i];
  return count;
}

CompressionSummary summarizeCompression(const CompressionResult& result, const ModelConfig& config) {
  CompressionSummary s;
  s.layers = config.num_layers;
  s.kv_heads = config.num_kv_heads;
  s.heads = config.num_heads;
  s.head_dim = result.keys.empty() ? config.head_dim : result.keys.front().size(-1);
  s.rows = result.prefill_rows;
  copyMetrics(s, result);
  fillFates(s, result);
  const int64_t per_layer_rows = s.kv_heads * s.rows;  // one score per row
  const int64_t per_layer_entries = per_layer_rows * s.head_dim;
  for (const at::Tensor& scores : result.scores) appendFloats(s.scores, scores, per_layer_rows, "a layer's scores");
  for (const at::Tensor& keys : result.keys) appendFloats(s.keys, keys, per_layer_entries, "a layer's keys");
  for (const at::Tensor& values : result.values) appendFloats(s.values, values, per_layer_entries, "a layer's values");
  for (const at::Tensor& keep : result.k_keep) appendZeroed(s.k_zeroed, keep, per_layer_entries);
  for (const at::Tensor& keep : result.v_keep) appendZeroed(s.v_zeroed, keep, per_layer_entries);
  // A pruning run without a recorded cache still has its masks: keep the views consistent.
  if (s.keys.empty()) {
    s.k_zeroed.clear();
    s.v_zeroed.clear();
  }
  if (result.output_error.defined()) {
    appendFloats(s.output_error, result.output_error, s.layers * s.heads, "the output error");
  }
  return s;
}

}  // namespace kvscope
