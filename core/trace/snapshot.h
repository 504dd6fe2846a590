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

#include "core/trace/metrics.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct CacheGeometry {
  bool present = false;  // false for the drafter cache of an n-gram / no drafter
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t heads = 0;  // query heads
  int64_t head_dim = 0;
};

// One ledger entry's K and V, each [layers, kv_heads, head_dim] row-major.
struct KvRowData {
  std::vector<float> k;
  std::vector<float> v;
};

// The verify forward of one round.
struct AttentionData {
  int64_t first_query_position = 0;
  int64_t heads = 0;
  int64_t queries = 0;
  int64_t keys = 0;
  std::vector<std::vector<float>> layers;  // per layer [heads, queries, keys] row-major
  // Per query row: the target's top tokens (id, softmax probability), best first.
  std::vector<std::vector<std::pair<int64_t, float>>> top_tokens;

  float at(int64_t layer, int64_t head, int64_t query, int64_t key) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>((head * queries + query) * keys + key)];
  }
};

// The cache audit: K/V recomputed from scratch vs what the cache holds.
struct AuditData {
  CacheRole cache = CacheRole::Target;
  int64_t round = -1;
  Phase after_phase = Phase::Prune;  // the state audited: after this phase of `round`
  std::vector<std::vector<double>> error;  // [layer][position] max |delta| (+inf: a missing or extra row)
  bool has_bad_cell = false;
  int64_t bad_layer = -1, bad_head = -1, bad_position = -1;
  double bad_error = 0;
  std::string bad_kind;
  int64_t bad_cells = 0;
  double max_value_error = 0;
};

// Cached vs uncached (lockstep diff) and the cache audit at the first divergence.
struct DiffPoint {
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  int64_t position = 0;  // the query whose next-token logits were compared
  double max_abs_logit_diff = 0;
  double kl = 0;
  bool top1_agree = true;
  int verdict = 0;  // 0 agree, 1 noise (inside float noise), 2 divergent
};

struct DiffData {
  std::string fault;  // the injected fault ("none")
  std::vector<DiffPoint> points;
  int64_t agree = 0, noise = 0, divergent = 0;
  double max_abs_logit_diff = 0;
  bool diverged = false;
  CacheRole divergence_cache = CacheRole::Target;
  int64_t divergence_round = -1;
  int64_t divergence_position = -1;
  std::shared_ptr<const AuditData> audit;  // at the divergence
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
  bool replay_only = false;  // opened from a .kvtrace: no models, nothing to step
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
  Metrics metrics;
  std::shared_ptr<const DiffData> diff;    // after a diff run of this session
  std::shared_ptr<const AuditData> audit;  // "Audit now" of the current state (cleared by a step)
  std::string fault = "none";

  // The last (round, phase) that has run: where a "latest" cursor sits.
  int64_t lastRound() const;
  Phase lastPhase() const;
  std::string tokenText(int64_t id) const;
  const RoundRecord* round(int64_t index) const;
};

// How an entry looks in the cache view at (round, phase): after that phase ran.
enum class RowStatus {
  Hidden,          // not born yet, or died in an earlier round
  Kept,            // alive from an earlier round
  Written,         // born in this round, still alive
  Pruned,          // alive earlier, removed in this round (up to this phase)
  WrittenPruned,   // born and removed in this round
};
const char* rowStatusName(RowStatus status);

// Phases in execution order: Prefill < Draft < Verify < Accept < Prune.
int phaseOrder(Phase phase);
RowStatus rowStatusAt(const LedgerEntry& entry, int64_t round, Phase phase);

// Entries of `cache` visible at (round, phase), ordered by position then birth.
std::vector<int64_t> visibleEntries(const SessionSnapshot& snapshot, CacheRole cache, int64_t round,
                                    Phase phase);

// One cache matrix for the heatmap: rows = visible entries, cols = head_dim.
struct CacheMatrix {
  std::vector<int64_t> entry_indices;  // into snapshot.entries, one per row
  std::vector<RowStatus> status;
  int64_t cols = 0;
  std::vector<float> values;  // [rows, cols] row-major
  float min = 0, max = 0;
};
CacheMatrix cacheMatrix(const SessionSnapshot& snapshot, CacheRole cache, int64_t round, Phase phase,
                        int64_t layer, int64_t kv_head, bool values);

}  // namespace kvscope
