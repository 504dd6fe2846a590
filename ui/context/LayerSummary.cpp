#include "ui/context/LayerSummary.h"

#include <algorithm>
#include <cmath>

#include "ui/context/RowLookup.h"

namespace kvscope::ui {

namespace {

// Max |x| of one layer's rows, per kv head (rows stored [layers, kv_heads, head_dim]).
void addLayerMaxima(const SessionSnapshot& s, const CacheGeometry& g, int64_t layer, int64_t entry, bool values,
                    float* per_head) {
  const LedgerEntry& e = s.entries[static_cast<size_t>(entry)];
  if (e.row < 0 || e.row >= static_cast<int64_t>(s.rows.size()) || !s.rows[static_cast<size_t>(e.row)]) return;
  const std::vector<float>& data = values ? s.rows[static_cast<size_t>(e.row)]->v : s.rows[static_cast<size_t>(e.row)]->k;
  const size_t per_layer = static_cast<size_t>(g.kv_heads * g.head_dim);
  if (data.size() < static_cast<size_t>(layer + 1) * per_layer) return;
  for (int64_t h = 0; h < g.kv_heads; ++h) {
    const float* x = data.data() + static_cast<size_t>(layer) * per_layer + static_cast<size_t>(h * g.head_dim);
    for (int64_t d = 0; d < g.head_dim; ++d) per_head[h] = std::max(per_head[h], std::fabs(x[d]));
  }
}

}  // namespace

LayerSummary layerSummary(const SessionSnapshot& s, CacheRole cache, const Moment& moment, bool values) {
  const CacheGeometry& g = s.geometry(cache);
  LayerSummary summary;
  if (!g.present) return summary;
  summary.layers = g.layers;
  summary.kv_heads = g.kv_heads;
  summary.max_abs.assign(static_cast<size_t>(g.layers * g.kv_heads), 0.0f);
  summary.bad_rows.assign(static_cast<size_t>(g.layers), 0);
  summary.worst.assign(static_cast<size_t>(g.layers), RowState::Ok);
  summary.rows.assign(static_cast<size_t>(g.layers), 0);
  for (int64_t layer = 0; layer < g.layers; ++layer) {
    float* per_head = summary.max_abs.data() + static_cast<size_t>(layer * g.kv_heads);
    for (const RowVerdict& v : rowVerdicts(s, cache, layer, moment)) {
      if (v.entry >= 0) {
        ++summary.rows[static_cast<size_t>(layer)];
        addLayerMaxima(s, g, layer, v.entry, values, per_head);
      }
      if (v.state == RowState::Ok) continue;
      ++summary.bad_rows[static_cast<size_t>(layer)];
      RowState& worst = summary.worst[static_cast<size_t>(layer)];
      if (verdictSeverity(v.state) > verdictSeverity(worst)) worst = v.state;
    }
  }
  return summary;
}

}  // namespace kvscope::ui
