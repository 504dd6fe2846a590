#pragma once
// Everything a speculative session recorded, as plain records: the sequence,
// the rounds, the verify passes, the KV ledger and the cache event log. A live
// Session owns one; a .kvtrace holds one. The audit, the root cause and the row
// history (core/audit) read only this, so they work the same on a live session and on a trace.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/cache_event_log.h"
#include "core/cache/kv_ledger.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// What the verify forward of one round saw, kept for the diff and the GUI.
// Under a fault, layers may attend to different numbers of rows.
struct VerifyRecord {
  at::Tensor logits;                  // [queries, vocab] float32, the rows that scored drafts + next
  std::vector<at::Tensor> attention;  // per layer [heads, queries, keys_l] float32 (when recorded)
  std::vector<at::Tensor> masks;      // per layer [queries, keys_l] bool: the mask the model applied
  int64_t first_query_position = 0;   // absolute position of the first query row
  // Recorded, then dropped to keep the session within its trace budget
  // (SessionOptions::trace_budget_mb; core/trace/record_budget.h).
  bool attention_dropped = false;
  bool logits_dropped = false;
};

struct SessionRecord {
  std::vector<int64_t> sequence;
  std::vector<TokenOrigin> origins;
  int64_t prompt_length = 0;
  std::vector<RoundRecord> rounds;  // [0] is the prefill
  std::map<int64_t, VerifyRecord> verify;
  KvLedger ledger;
  CacheEventLog events;
  Bookkeeping bookkeeping = Bookkeeping::Exact;
  std::string fault = "none";
  bool use_cache = true;
  int64_t target_layers = 0;
  int64_t drafter_layers = 0;  // 0 without a drafter model

  int64_t layers(CacheRole cache) const { return cache == CacheRole::Target ? target_layers : drafter_layers; }
  // The tokens whose rows a cache should hold during `round`: the sequence as
  // the round began followed by its drafts (the prompt for round 0). Every
  // cache's expected rows at any moment of the round are a prefix of it.
  std::vector<int64_t> streamOfRound(int64_t round) const;
  // The last moment recorded (the prefill when nothing else ran).
  Moment lastMoment() const;
};

}  // namespace kvscope
