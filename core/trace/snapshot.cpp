#include "core/trace/snapshot.h"

#include <algorithm>
#include <limits>

namespace kvscope {

namespace {
// The phase that ran just before `phase` within its round.
bool previousPhase(int64_t round, Phase phase, int64_t* out_round, Phase* out_phase) {
  switch (phase) {
    case Phase::Prefill: return false;
    case Phase::Draft:
      if (round <= 1) { *out_round = 0; *out_phase = Phase::Prefill; }
      else { *out_round = round - 1; *out_phase = Phase::Prune; }
      return true;
    case Phase::Verify: *out_round = round; *out_phase = Phase::Draft; return true;
    case Phase::Accept: *out_round = round; *out_phase = Phase::Verify; return true;
    case Phase::Prune: *out_round = round; *out_phase = Phase::Accept; return true;
  }
  return false;
}
}  // namespace

int64_t SessionSnapshot::lastRound() const {
  int64_t r = -1;
  Phase p = Phase::Prefill;
  if (!previousPhase(current_round, next_phase, &r, &p)) return -1;
  return r;
}

Phase SessionSnapshot::lastPhase() const {
  int64_t r = -1;
  Phase p = Phase::Prefill;
  previousPhase(current_round, next_phase, &r, &p);
  return p;
}

std::string SessionSnapshot::tokenText(int64_t id) const {
  if (vocab && id >= 0 && id < static_cast<int64_t>(vocab->size())) return (*vocab)[static_cast<size_t>(id)];
  return "<" + std::to_string(id) + ">";
}

const RoundRecord* SessionSnapshot::round(int64_t index) const {
  for (const RoundRecord& record : rounds) {
    if (record.index == index) return &record;
  }
  return nullptr;
}

const char* rowStatusName(RowStatus status) {
  switch (status) {
    case RowStatus::Hidden: return "hidden";
    case RowStatus::Kept: return "kept";
    case RowStatus::Written: return "written this round";
    case RowStatus::Pruned: return "pruned this round";
    case RowStatus::WrittenPruned: return "written and pruned this round";
  }
  return "?";
}

int phaseOrder(Phase phase) {
  switch (phase) {
    case Phase::Prefill: return 0;
    case Phase::Draft: return 1;
    case Phase::Verify: return 2;
    case Phase::Accept: return 3;
    case Phase::Prune: return 4;
  }
  return 0;
}

RowStatus rowStatusAt(const LedgerEntry& entry, int64_t round, Phase phase) {
  const int order = phaseOrder(phase);
  if (entry.born_round > round || (entry.born_round == round && phaseOrder(entry.born_phase) > order)) {
    return RowStatus::Hidden;
  }
  const bool born_here = entry.born_round == round;
  if (entry.died_round >= 0) {
    if (entry.died_round < round) return RowStatus::Hidden;
    if (entry.died_round == round && phaseOrder(entry.died_phase) <= order) {
      return born_here ? RowStatus::WrittenPruned : RowStatus::Pruned;
    }
  }
  return born_here ? RowStatus::Written : RowStatus::Kept;
}

std::vector<int64_t> visibleEntries(const SessionSnapshot& snapshot, CacheRole cache, int64_t round, Phase phase) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < snapshot.entries.size(); ++i) {
    const LedgerEntry& entry = snapshot.entries[i];
    if (entry.cache != cache) continue;
    if (rowStatusAt(entry, round, phase) != RowStatus::Hidden) out.push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(out.begin(), out.end(), [&](int64_t a, int64_t b) {
    const LedgerEntry& ea = snapshot.entries[static_cast<size_t>(a)];
    const LedgerEntry& eb = snapshot.entries[static_cast<size_t>(b)];
    if (ea.position != eb.position) return ea.position < eb.position;
    return ea.born_round < eb.born_round;
  });
  return out;
}

CacheMatrix cacheMatrix(const SessionSnapshot& snapshot, CacheRole cache, int64_t round, Phase phase,
                        int64_t layer, int64_t kv_head, bool values) {
  CacheMatrix matrix;
  const CacheGeometry& geometry = cache == CacheRole::Target ? snapshot.target : snapshot.drafter;
  if (!geometry.present || layer < 0 || layer >= geometry.layers || kv_head < 0 || kv_head >= geometry.kv_heads) {
    return matrix;
  }
  matrix.cols = geometry.head_dim;
  matrix.entry_indices = visibleEntries(snapshot, cache, round, phase);
  matrix.values.reserve(matrix.entry_indices.size() * static_cast<size_t>(matrix.cols));
  float lo = std::numeric_limits<float>::max();
  float hi = std::numeric_limits<float>::lowest();
  const size_t offset = static_cast<size_t>((layer * geometry.kv_heads + kv_head) * geometry.head_dim);
  for (int64_t index : matrix.entry_indices) {
    const LedgerEntry& entry = snapshot.entries[static_cast<size_t>(index)];
    matrix.status.push_back(rowStatusAt(entry, round, phase));
    const auto row = entry.row >= 0 && entry.row < static_cast<int64_t>(snapshot.rows.size())
                         ? snapshot.rows[static_cast<size_t>(entry.row)]
                         : nullptr;
    const std::vector<float>* data = row ? (values ? &row->v : &row->k) : nullptr;
    for (int64_t c = 0; c < matrix.cols; ++c) {
      const size_t at = offset + static_cast<size_t>(c);
      const float x = data && at < data->size() ? (*data)[at] : 0.0f;
      matrix.values.push_back(x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (!matrix.values.empty()) {
    matrix.min = lo;
    matrix.max = hi;
  }
  return matrix;
}

}  // namespace kvscope
