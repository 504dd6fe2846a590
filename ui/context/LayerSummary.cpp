#include "ui/context/LayerSummary.h"

#include <algorithm>
#include <cmath>

#include "core/audit/row_identity.h"
#include "ui/context/RowLookup.h"

namespace kvscope::ui {

namespace {

// max |x[i]|. Four independent maxima: one running max is a chain of
// dependent compares (a 2,000-row, 24-layer summary spent ~15 ms in it), and
// the compiler may not reorder a float max reduction itself.
float maxAbs(const float* x, int64_t n) {
  float m0 = 0, m1 = 0, m2 = 0, m3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    m0 = std::max(m0, std::fabs(x[i]));
    m1 = std::max(m1, std::fabs(x[i + 1]));
    m2 = std::max(m2, std::fabs(x[i + 2]));
    m3 = std::max(m3, std::fabs(x[i + 3]));
  }
  for (; i < n; ++i) m0 = std::max(m0, std::fabs(x[i]));
  return std::max(std::max(m0, m1), std::max(m2, m3));
}

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
    per_head[h] = std::max(per_head[h], maxAbs(x, g.head_dim));
  }
}

}  // namespace

LayerSummary layerSummary(const SessionSnapshot& s, CacheRole cache, const Moment& moment, bool values) {
  const CacheGeometry& g = s.geometry(cache);
  LayerSummary summary;
  if (!g.present) return summary;
  summary.layers = g.layers;
  summary.kv_heads = g.kv_heads;
  summary.first_kv_head = g.first_kv_head;
  summary.max_abs.assign(static_cast<size_t>(g.layers * g.kv_heads), 0.0f);
  summary.bad_rows.assign(static_cast<size_t>(g.layers), 0);
  summary.worst.assign(static_cast<size_t>(g.layers), RowState::Ok);
  summary.rows.assign(static_cast<size_t>(g.layers), 0);
  // Every layer from one replay of the event log and one token stream (per
  // layer, the replay alone took 13-43 ms on a 24-layer, 2,000-row session).
  const CacheLayout layout = s.events.layoutAt(cache, g.layers, moment);
  const std::vector<int64_t> stream = streamOfRound(s.sequence, s.prompt_length, s.rounds, moment.round);
  for (int64_t layer = 0; layer < g.layers; ++layer) {
    float* per_head = summary.max_abs.data() + static_cast<size_t>(layer * g.kv_heads);
    const std::vector<RowVerdict> verdicts = classifyRows(s.entries, cache, layer, layout.layers[static_cast<size_t>(layer)],
                                                          rowContract(s, cache, layer, moment), stream);
    for (const RowVerdict& v : verdicts) {
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
