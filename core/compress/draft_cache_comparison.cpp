#include "core/compress/draft_cache_comparison.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <torch/types.h>

#include "core/cache/kv_cache.h"
#include "core/error.h"

namespace kvscope {

namespace {

void appendFloats(std::vector<float>& out, const at::Tensor& t) {
  const auto flat = t.to(torch::kFloat32).contiguous();
  out.insert(out.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

// The drafting copy's layer laid out by sequence position: K or V
// [kv_heads, positions, head_dim] with zero rows where it holds nothing, and
// the held mask [kv_heads, positions].
struct ScatteredLayer {
  at::Tensor keys, values, held;
};

ScatteredLayer scatterByPosition(const KvCache& draft, int64_t layer, int64_t shift, int64_t positions) {
  const int64_t kv = draft.kvHeads();
  const int64_t dim = draft.headDim();
  const auto sequence_positions = draft.rowPositions(layer) + shift;  // [kv, rows]
  auto readable = torch::ones(sequence_positions.sizes(), torch::kBool);
  if (const auto mask = draft.keepMask(layer); mask.defined()) readable = mask;  // a masked layout still stores removed rows
  readable = readable.logical_and(sequence_positions.ge(0)).logical_and(sequence_positions.lt(positions));
  ScatteredLayer out{torch::zeros({kv, positions, dim}), torch::zeros({kv, positions, dim}),
                     torch::zeros({kv, positions}, torch::kBool)};
  const auto keys = draft.keys(layer).to(torch::kFloat32);    // [kv, rows, dim]
  const auto values = draft.values(layer).to(torch::kFloat32);  // [kv, rows, dim]
  for (int64_t h = 0; h < kv; ++h) {
    const auto rows = readable[h].nonzero().squeeze(1);  // [held]
    const auto at = sequence_positions[h].index_select(0, rows);
    out.keys[h].index_copy_(0, at, keys[h].index_select(0, rows));
    out.values[h].index_copy_(0, at, values[h].index_select(0, rows));
    out.held[h].index_fill_(0, at, true);
  }
  return out;
}

}  // namespace

bool DraftCacheComparison::contains(int64_t layer, int64_t kv_head) const {
  return layer >= 0 && layer < layers && kv_head >= 0 && kv_head < kv_heads;
}

bool DraftCacheComparison::holds(int64_t layer, int64_t kv_head, int64_t position) const {
  if (!contains(layer, kv_head) || position < 0 || position >= positions) return false;
  return draft_holds[static_cast<size_t>((layer * kv_heads + kv_head) * positions + position)] != 0;
}

float DraftCacheComparison::entry(bool draft, bool values, int64_t layer, int64_t kv_head, int64_t position,
                                  int64_t channel) const {
  const auto& data = draft ? (values ? draft_values : draft_keys) : (values ? full_values : full_keys);
  return data[static_cast<size_t>(((layer * kv_heads + kv_head) * positions + position) * head_dim + channel)];
}

int64_t DraftCacheComparison::heldRows(int64_t layer, int64_t kv_head) const {
  int64_t held = 0;
  for (int64_t p = 0; p < positions; ++p) held += holds(layer, kv_head, p) ? 1 : 0;
  return held;
}

double DraftCacheComparison::rowDifference(bool values, int64_t layer, int64_t kv_head, int64_t position) const {
  if (!holds(layer, kv_head, position)) return 0;
  double largest = 0, scale = 0;
  for (int64_t c = 0; c < head_dim; ++c) {
    const double full = entry(false, values, layer, kv_head, position, c);
    largest = std::max(largest, std::abs(entry(true, values, layer, kv_head, position, c) - full));
    scale = std::max(scale, std::abs(full));
  }
  return scale > 0 ? largest / scale : largest;
}

DraftCacheComparison compareDraftCache(const KvCache& full, const KvCache& draft, int64_t draft_shift,
                                       int64_t compressed_rows) {
  require(full.numLayers() == draft.numLayers() && full.kvHeads() == draft.kvHeads() && full.headDim() == draft.headDim(),
          "draft cache comparison: the drafting cache's shape differs from the full cache's");
  DraftCacheComparison c;
  c.layers = full.numLayers();
  c.kv_heads = full.kvHeads();
  c.head_dim = full.headDim();
  c.positions = full.endPosition(0);
  c.compressed_rows = std::min(compressed_rows, c.positions);
  for (int64_t l = 0; l < c.layers; ++l) {
    require(full.firstPosition(l) == 0 && full.length(l) == c.positions,
            "draft cache comparison: layer " + std::to_string(l) + " of the full cache does not cover positions 0.." +
                std::to_string(c.positions - 1));
    appendFloats(c.full_keys, full.keys(l));
    appendFloats(c.full_values, full.values(l));
    const ScatteredLayer d = scatterByPosition(draft, l, draft_shift, c.positions);
    appendFloats(c.draft_keys, d.keys);
    appendFloats(c.draft_values, d.values);
    const auto held = d.held.to(torch::kUInt8).contiguous();
    c.draft_holds.insert(c.draft_holds.end(), held.data_ptr<uint8_t>(), held.data_ptr<uint8_t>() + held.numel());
  }
  return c;
}

}  // namespace kvscope
