#include "core/cache/kv_ledger.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {

int64_t KvLedger::recordBirths(CacheRole cache, const std::vector<RowIdentity>& rows,
                              const std::vector<at::Tensor>& k_layers, const std::vector<at::Tensor>& v_layers,
                              int64_t round, Phase phase) {
  require(!k_layers.empty() && k_layers.size() == v_layers.size(), "KvLedger: expected K and V rows of every layer");
  // One float32 copy for the whole write (stack copies; to() converts only
  // a cache stored in another dtype); each row is a view of it. Rows born
  // together are never freed apart, and a copy per row costs more than the
  // forward of a small drafter.
  return recordBirths(cache, rows, torch::stack(k_layers).to(torch::kFloat32),  // [layers, kv_heads, n, head_dim]
                      torch::stack(v_layers).to(torch::kFloat32), round, phase);
}

int64_t KvLedger::recordBirths(CacheRole cache, const std::vector<RowIdentity>& rows, const at::Tensor& k32,
                              const at::Tensor& v32, int64_t round, Phase phase) {
  const int64_t n = static_cast<int64_t>(rows.size());
  require(k32.dim() == 4 && k32.size(2) == n && v32.sizes() == k32.sizes() && k32.scalar_type() == torch::kFloat32 &&
              v32.scalar_type() == torch::kFloat32,
          "KvLedger: expected K/V rows [kv_heads, n, head_dim] per layer for " + std::to_string(n) + " rows");
  const int64_t first = static_cast<int64_t>(entries_.size());
  const int64_t write = static_cast<int64_t>(k_writes_.size());
  if (n > 0) {
    k_writes_.push_back(k32);
    v_writes_.push_back(v32);
  }
  for (int64_t i = 0; i < n; ++i) {
    LedgerEntry entry;
    entry.cache = cache;
    entry.token = rows[i].token;
    entry.position = rows[i].position;
    entry.rope_position = rows[i].rope_position;
    entry.padding = rows[i].padding;
    entry.born_round = round;
    entry.born_phase = phase;
    entry.row = static_cast<int64_t>(rows_.size());
    rows_.push_back({write, i});
    entries_.push_back(entry);
  }
  return first;
}

void KvLedger::recordDeath(int64_t index, int64_t round, Phase phase, DeathReason reason) {
  LedgerEntry& e = entries_.at(static_cast<size_t>(index));
  e.died_round = round;
  e.died_phase = phase;
  e.reason = reason;
}

std::vector<int64_t> KvLedger::liveAfterRound(CacheRole cache, int64_t round) const {
  std::vector<int64_t> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const LedgerEntry& e = entries_[i];
    if (e.cache == cache && e.aliveAt(round)) out.push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](int64_t a, int64_t b) { return entries_[a].position < entries_[b].position; });
  return out;
}

int64_t KvLedger::liveCount(CacheRole cache) const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [&](const LedgerEntry& e) { return e.cache == cache && e.died_round < 0; });
}

at::Tensor KvLedger::rowOf(const std::vector<at::Tensor>& writes, int64_t row) const {
  const RowPlace& place = rows_.at(static_cast<size_t>(row));
  const at::Tensor& write = writes[static_cast<size_t>(place.write)];
  return place.index < 0 ? write : write.select(2, place.index);  // [layers, kv_heads, head_dim]
}

at::Tensor KvLedger::keys(int64_t row) const { return rowOf(k_writes_, row); }

at::Tensor KvLedger::values(int64_t row) const { return rowOf(v_writes_, row); }

std::vector<at::Tensor> KvLedger::allRows(const std::vector<at::Tensor>& writes) const {
  std::vector<at::Tensor> rows;
  rows.reserve(rows_.size());
  for (int64_t row = 0; row < rowCount(); ++row) rows.push_back(rowOf(writes, row));
  return rows;
}

at::Tensor KvLedger::stackRows(const std::vector<at::Tensor>& writes, const std::vector<int64_t>& entry_indices) const {
  require(!entry_indices.empty(), "KvLedger: no entries to stack");
  std::vector<at::Tensor> picked;
  picked.reserve(entry_indices.size());
  for (int64_t i : entry_indices) picked.push_back(rowOf(writes, entries_.at(static_cast<size_t>(i)).row));
  return torch::stack(picked, 2);  // [layers, kv_heads, entries, head_dim]
}

std::vector<at::Tensor> KvLedger::keyRows() const { return allRows(k_writes_); }

std::vector<at::Tensor> KvLedger::valueRows() const { return allRows(v_writes_); }

at::Tensor KvLedger::stackKeys(const std::vector<int64_t>& entry_indices) const {
  return stackRows(k_writes_, entry_indices);
}

at::Tensor KvLedger::stackValues(const std::vector<int64_t>& entry_indices) const {
  return stackRows(v_writes_, entry_indices);
}

void KvLedger::restore(std::vector<LedgerEntry> entries, std::vector<at::Tensor> k_rows,
                       std::vector<at::Tensor> v_rows) {
  require(k_rows.size() == v_rows.size(), "KvLedger::restore: K and V row counts differ");
  for (const LedgerEntry& e : entries) {
    require(e.row >= 0 && e.row < static_cast<int64_t>(k_rows.size()),
            "KvLedger::restore: entry row " + std::to_string(e.row) + " out of range");
  }
  entries_ = std::move(entries);
  k_writes_ = std::move(k_rows);
  v_writes_ = std::move(v_rows);
  rows_.assign(k_writes_.size(), RowPlace{});
  for (size_t row = 0; row < rows_.size(); ++row) rows_[row].write = static_cast<int64_t>(row);
}

}  // namespace kvscope
