#pragma once
// The life of every cache entry of a session: which cache, position, token,
// the round and phase it was written, and when and why it was removed.
// Each entry's K/V rows (all layers) are stored once, at birth, so the cache
// as it stood after any round can be rebuilt without a snapshot per round.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/ledger_entry.h"

namespace kvscope {

// Who a written row is: the token, the position it was computed for and the
// rotary position applied (they differ only under a fault).
struct RowIdentity {
  int64_t token = 0;
  int64_t position = 0;
  int64_t rope_position = 0;
  bool padding = false;  // a pad row (position -1): no token of the sequence

  static RowIdentity pad(int64_t token) { return {token, -1, 0, true}; }
};

class KvLedger {
 public:
  // New entries, one per written row, in physical order; k_layers and
  // v_layers hold per layer the written rows [kv_heads, rows, head_dim] as
  // stored (views of the cache are fine: the ledger keeps a float32 copy).
  // Returns the index of the first.
  int64_t recordBirths(CacheRole cache, const std::vector<RowIdentity>& rows, const std::vector<at::Tensor>& k_layers,
                       const std::vector<at::Tensor>& v_layers, int64_t round, Phase phase);
  // The same with the rows already in one float32 copy each for K and V:
  // [layers, kv_heads, n, head_dim] (KvCache::copyRows); rows keep views of it.
  int64_t recordBirths(CacheRole cache, const std::vector<RowIdentity>& rows, const at::Tensor& k32,
                       const at::Tensor& v32, int64_t round, Phase phase);
  // The entry left the last layer that held it.
  void recordDeath(int64_t entry, int64_t round, Phase phase, DeathReason reason);

  const std::vector<LedgerEntry>& entries() const { return entries_; }
  // Live entries of `cache` at the end of `round`, ordered by position.
  std::vector<int64_t> liveAfterRound(CacheRole cache, int64_t round) const;
  int64_t liveCount(CacheRole cache) const;
  const LedgerEntry& entry(int64_t index) const { return entries_.at(static_cast<size_t>(index)); }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

  at::Tensor keys(int64_t row) const;    // [layers, kv_heads, head_dim]
  at::Tensor values(int64_t row) const;  // [layers, kv_heads, head_dim]
  int64_t rowCount() const { return static_cast<int64_t>(rows_.size()); }
  // Rows of the given entries stacked: [layers, kv_heads, entries, head_dim].
  at::Tensor stackKeys(const std::vector<int64_t>& entry_indices) const;
  at::Tensor stackValues(const std::vector<int64_t>& entry_indices) const;

  // For the trace file: all rows of one cache, in entry order, and restore.
  std::vector<at::Tensor> keyRows() const;
  std::vector<at::Tensor> valueRows() const;
  void restore(std::vector<LedgerEntry> entries, std::vector<at::Tensor> k_rows, std::vector<at::Tensor> v_rows);

 private:
  // Where a row's K/V lie: row `index` (dim 2) of one write's copy, or,
  // with index -1, a whole row tensor (restored from a trace). The views are
  // made when asked for: two ATen selects per row at birth cost a small
  // drafter's step more than its attention.
  struct RowPlace {
    int64_t write = 0;
    int64_t index = -1;
  };
  at::Tensor rowOf(const std::vector<at::Tensor>& writes, int64_t row) const;  // [layers, kv_heads, head_dim]
  std::vector<at::Tensor> allRows(const std::vector<at::Tensor>& writes) const;
  at::Tensor stackRows(const std::vector<at::Tensor>& writes, const std::vector<int64_t>& entry_indices) const;

  std::vector<LedgerEntry> entries_;
  std::vector<at::Tensor> k_writes_;  // [layers, kv_heads, n, head_dim] per write, or one restored row
  std::vector<at::Tensor> v_writes_;
  std::vector<RowPlace> rows_;
};

}  // namespace kvscope
