#pragma once
// A read-only picture of a speculative session for the GUI: plain structs and
// std::vector<float> matrices copied out of the session on the worker thread.
// Torch-free and Qt-free, so the GUI includes it without libtorch headers.
//
// K/V rows and verify attention never change once recorded, so successive
// snapshots share them (shared_ptr<const ...>): a snapshot after every step
// costs the new rows only.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/audit/diff_report.h"
#include "core/cache/cache_event_log.h"
#include "core/snapshot/pool_history.h"
#include "core/snapshot/pool_view.h"
#include "core/trace/metrics.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct CacheGeometry {
  bool present = false;  // false for the drafter cache of an n-gram / no drafter
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t heads = 0;  // query heads
  int64_t head_dim = 0;
  // A tensor-parallel rank's cache holds KV heads first_kv_head ..
  // first_kv_head + kv_heads - 1 of the model's model_kv_heads: views number
  // its heads as the model does (docs/serving-engines.md). 0 and kv_heads
  // for a whole cache.
  int64_t first_kv_head = 0;
  int64_t model_kv_heads = 0;
  int64_t modelHead(int64_t head) const { return first_kv_head + head; }
};

// One recurrent state of a hybrid capture (docs/capture-format-v3.md,
// "Recurrent state"): a call's state of one recurrent layer and kind, the one
// it resumed from (before) or the one it left (after), with its identity.
struct RecurrentStateRow {
  CacheRole cache = CacheRole::Target;
  int64_t call = 0;            // that role's call index
  int64_t first_position = 0;  // the position of the call's first input
  int64_t inputs = 0;          // the call's inputs
  bool before = true;          // resumed from; false: left after the call
  int64_t layer = 0;
  std::string kind;            // "conv" or "ssm"
  int64_t id = 0;              // the capture's state id
  int64_t after_position = -1;    // the state is after this position; -1: no recorded call computed it
  int64_t computed_by_call = -1;  // -1: no recorded call
  // The tokens the state folded in, oldest first (its provenance chain).
  std::vector<int64_t> folded_positions;
  std::vector<int64_t> folded_tokens;
  int64_t rejected_drafts_of = -1;  // it holds tokens the sequence did not keep, fed by this call
  bool breach = false;      // the call resumed from it, breaking the rule
  bool root_cause = false;  // ... and that breach is the check's root cause
  std::string what;         // the rule's sentence when breach
};

// One ledger entry's K and V, each [layers, kv_heads, head_dim] row-major.
struct KvRowData {
  std::vector<float> k;
  std::vector<float> v;
};

// The verify forward of one round. Keys are the target cache's physical rows
// of each layer as the model attended to them (layers may differ under a
// fault); their identities come from the cache event log (verifyKeyRows).
struct AttentionData {
  int64_t round = 0;
  int64_t first_query_position = 0;
  int64_t heads = 0;
  int64_t queries = 0;
  std::vector<int64_t> keys;                      // per layer: rows attended
  std::vector<std::vector<float>> layers;         // per layer [heads, queries, keys[l]] row-major
  std::vector<std::vector<uint8_t>> masks;        // per layer [queries, keys[l]]: 1 = visible (the mask applied)
  // Per query row: the target's top tokens (id, softmax probability), best first.
  std::vector<std::vector<std::pair<int64_t, float>>> top_tokens;
  // The session recorded this round's attention / logits, then dropped them
  // to stay within its trace budget (layers / top_tokens are then empty).
  bool attention_dropped = false;
  bool logits_dropped = false;

  int64_t layerCount() const { return static_cast<int64_t>(layers.size()); }
  int64_t keyCount(int64_t layer) const;
  // 0 outside the recorded ranges.
  float at(int64_t layer, int64_t head, int64_t query, int64_t key) const;
  // Whether the model's mask let `query` see `key` (false outside the ranges).
  bool visible(int64_t layer, int64_t query, int64_t key) const;
};

struct SessionSnapshot {
  // --- what was loaded ------------------------------------------------------
  std::string target_name;
  std::string drafter_name;  // Drafter::describe(), or "none"
  CacheGeometry target;
  CacheGeometry drafter;
  std::shared_ptr<const std::vector<std::string>> vocab;  // per id: text as it appears in running text
  std::string options_summary;
  bool greedy = true;
  bool use_cache = true;

  // --- state ----------------------------------------------------------------
  bool finished = false;
  bool replay_only = false;  // opened from a .kvtrace or a .kvcapture: nothing to step
  // Opened from another engine's capture (core/check/capture_snapshot.h):
  // rounds inferred from the target's calls, each event names its call.
  bool from_capture = false;
  std::string opened_file;         // the file shown when replay_only
  std::vector<std::string> notes;  // what could not be checked, and why
  // A batched capture: per sequence of the batch, per round (the target call
  // that closes it), the drafts that sequence accepted; -1 where the call was
  // no verify of that sequence. Empty for one sequence.
  std::vector<std::vector<int64_t>> batch_accepted;
  int64_t shown_sequence = 0;  // the batch row the rest of the snapshot is
  // A tensor-parallel rank's capture: rank `rank` of `ranks` (its heads: CacheGeometry); -1 and 0 otherwise.
  int64_t rank = -1;
  int64_t ranks = 0;
  // A hybrid capture's recurrent states, per call (before, then after), layer and kind; empty otherwise.
  std::vector<RecurrentStateRow> recurrent_states;
  Phase next_phase = Phase::Prefill;
  int64_t current_round = 0;  // the round next_phase belongs to
  int64_t current_gamma = 0;

  // --- sequence ---------------------------------------------------------------
  std::vector<int64_t> sequence;
  std::vector<TokenOrigin> origins;
  std::vector<int64_t> emitted_round;  // per position: the round that appended it (0: prompt)
  int64_t prompt_length = 0;

  // --- trace ------------------------------------------------------------------
  std::vector<RoundRecord> rounds;  // [0] is the prefill
  std::vector<LedgerEntry> entries;
  std::vector<std::shared_ptr<const KvRowData>> rows;  // indexed by LedgerEntry::row
  std::map<int64_t, std::shared_ptr<const AttentionData>> attention;  // by round
  CacheEventLog events;             // every cache operation, in order
  Bookkeeping bookkeeping = Bookkeeping::Exact;
  Metrics metrics;
  std::shared_ptr<const DiffReport> diff;  // after a diff run of this session (kept in traces)
  // The audit of both caches at a moment (Audit at cursor); the cursor does not move.
  std::shared_ptr<const CacheAudit> audit_target;
  std::shared_ptr<const CacheAudit> audit_drafter;
  std::string fault = "none";
  std::string prompt;  // as typed, or as decoded from a trace
  // A paged session's block pools (docs/paged-cache.md), as the run left
  // them (the live end), and their histories, which give the pool at any
  // moment (poolAt). Null for a contiguous cache, a replay, or a cache the
  // session does not have.
  std::shared_ptr<const PoolView> target_pool;
  std::shared_ptr<const PoolView> drafter_pool;
  std::shared_ptr<const PoolHistory> target_pool_history;
  std::shared_ptr<const PoolHistory> drafter_pool_history;

  // The last (round, phase) that has run: where a "latest" cursor sits.
  int64_t lastRound() const;
  Phase lastPhase() const;
  Moment lastMoment() const { return {lastRound(), lastPhase()}; }
  const CacheGeometry& geometry(CacheRole cache) const { return cache == CacheRole::Target ? target : drafter; }
  const std::shared_ptr<const CacheAudit>& audit(CacheRole cache) const {
    return cache == CacheRole::Target ? audit_target : audit_drafter;
  }
  const std::shared_ptr<const PoolView>& pool(CacheRole cache) const {
    return cache == CacheRole::Target ? target_pool : drafter_pool;
  }
  const std::shared_ptr<const PoolHistory>& poolHistory(CacheRole cache) const {
    return cache == CacheRole::Target ? target_pool_history : drafter_pool_history;
  }
  std::string tokenText(int64_t id) const;
  const RoundRecord* round(int64_t index) const;
};

// How a row looks in the cache view at a moment (after that phase ran).
enum class RowStatus {
  Hidden,          // not born yet, or removed in an earlier round
  Kept,            // written in an earlier round
  Written,         // written in this round, still held
  Pruned,          // written earlier, removed in this round (up to this phase)
  WrittenPruned,   // written and removed in this round
};
const char* rowStatusName(RowStatus status);

// The `cache` pool just after `moment` ran, replayed from its history; the
// pool as the run left it when the snapshot has no history; null when the
// cache has no pool.
std::shared_ptr<const PoolView> poolAt(const SessionSnapshot& snapshot, CacheRole cache, const Moment& moment);

// The moment just before `moment` (the prefill has none: returns false).
bool previousMoment(const Moment& moment, Moment* out);
// The moment just after `moment` in a session's phase order.
Moment nextMoment(const Moment& moment);

// One row of a layer as the views show it: the physical rows held at the
// moment, in row order, then the rows this round removed so far (faded).
struct ViewRow {
  int64_t entry = -1;         // into snapshot.entries
  int64_t physical_row = -1;  // -1 for a row already removed
  RowStatus status = RowStatus::Kept;
  RowState state = RowState::Ok;  // identity against the bookkeeping (values: see the audit)
  // Set by cacheMatrix for its kv head: the policy Evict event (index into
  // snapshot.events) that masked this row there; -1 while the head reads it.
  int64_t masked_by = -1;
};
std::vector<ViewRow> viewRows(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, const Moment& moment);
// The physical rows (ledger entries) of one layer just after `moment`.
std::vector<int64_t> physicalRows(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer,
                                  const Moment& moment);
// What the bookkeeping expects one layer to hold at `moment`: positions
// [first, end) of the round's stream (first > 0 only under a sliding window).
RowContract rowContract(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, const Moment& moment);
// The keys of round `round`'s verify attention in `layer`: the target's
// physical rows just after the verify pass (entries, in row order).
std::vector<int64_t> verifyKeyRows(const SessionSnapshot& snapshot, int64_t round, int64_t layer);
// Attention that `entry` received in the verify pass of `round`, summed over
// queries, per query head of `layer` (empty when the row was not a key).
std::vector<float> attentionReceived(const SessionSnapshot& snapshot, int64_t round, int64_t layer, int64_t entry);

// One cache matrix for the heatmap: rows = viewRows (with masked_by for
// `kv_head`), cols = head_dim.
struct CacheMatrix {
  std::vector<ViewRow> rows;
  int64_t cols = 0;
  std::vector<float> values;  // [rows, cols] row-major
  float min = 0, max = 0;
};
CacheMatrix cacheMatrix(const SessionSnapshot& snapshot, CacheRole cache, const Moment& moment, int64_t layer,
                        int64_t kv_head, bool values);

}  // namespace kvscope
