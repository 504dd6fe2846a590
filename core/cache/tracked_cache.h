#pragma once
// One model's KV cache together with its books: which ledger entry each
// physical row of each layer holds, the rows the exact bookkeeping requires,
// the tokens the engine believes the cache holds, and the operation log.
//
// It is the only way an engine changes a cache, as llama.cpp's memory owns
// seq_rm / seq_add / seq_keep and nobody outside edits its cells. A forward's
// write (forward: the cache runs the model into its storage), a copy of
// computed rows, a crop, a reset, a re-feed, a sliding window's eviction, an
// eviction policy's keep decision and a compression each go through one
// method here, which performs it on the storage, logs it once
// (CacheEventLog) with the rows it removed and the rows the contract
// required afterwards, and records births and deaths in the ledger. Nobody
// else holds the storage mutably: callers read it (storage()) and policies
// decide from what they read (core/cache/cache_compression.h).
// A fault acts through the FaultPolicy the cache is given: the policy answers
// what each operation physically does; the books say what was required.
//
// The two caches of a session share one ledger and one log (entries are
// numbered across both), so the cache keeps references to them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/cache_compression.h"
#include "core/cache/cache_event_log.h"
#include "core/cache/eviction_masks.h"
#include "core/cache/fault_policy.h"
#include "core/cache/kv_cache.h"
#include "core/cache/kv_ledger.h"
#include "core/model/forward_runner.h"

namespace kvscope {

class CausalLM;
class ProbeSink;

// A forward's write into a tracked cache, planned before the forward runs
// and logged after it (inside TrackedCache::forward and copyRows).
struct PlannedWrite {
  Phase phase = Phase::Prefill;
  int64_t start = 0;       // the position of the first token fed
  int64_t rope_start = 0;  // the rotary position the forward applies to it
  std::vector<int64_t> tokens;       // the tokens fed, in order
  std::vector<int64_t> order;        // which of them are written, in physical row order
  std::vector<int64_t> rows_before;  // per layer, the rows the books count (rowsPerLayer)
  std::vector<int64_t> storage_rows_before;  // per layer, where the storage appends the new rows
  int64_t expected_rows = 0;         // the rows the cache must hold afterwards
  int64_t bonus_index = -1;          // index among `tokens` of a bonus token not yet written
  std::string fault_action;
};

// A cut after verification: the engine keeps `keep` tokens; rows computed
// for positions >= first_wrong_position came from a rejected draft.
struct PruneRequestOfRound {
  int64_t keep = 0;
  int64_t first_wrong_position = 0;
  int64_t accepted = 0;          // n, the drafts accepted this round
  bool seed_bookkeeping = false; // correct rows cut on purpose are re-fed next round
  int64_t batch_most_accepted = -1;  // in a batch: the most drafts any sequence accepted (-1 alone)
  bool last_in_batch = false;        // in a batch: this is its last sequence
};

class TrackedCache {
 public:
  // windows: per layer, the sliding window of keys (<= 0: a global layer).
  TrackedCache(CacheRole role, std::unique_ptr<KvCache> storage, std::vector<int64_t> windows,
               const FaultPolicy& faults, KvLedger& ledger, CacheEventLog& log);

  CacheRole role() const { return role_; }
  // How forward() reaches the model: at once (the default), or joined with
  // other sequences' forwards into a batch (core/decode/forward_batcher.h).
  void setForwardRunner(ForwardRunner& runner) { runner_ = &runner; }
  // What the cache holds, to read (policies decide from it); every change is
  // a method below.
  const KvCache& storage() const { return *storage_; }
  int64_t numLayers() const { return storage_->numLayers(); }
  const std::vector<int64_t>& believedTokens() const { return believed_; }
  // The physical rows of every layer now: layout().layers[l][r] is a ledger entry.
  const CacheLayout& layout() const { return layout_; }
  // The rows an eviction policy masked, per (entry, layer, kv head).
  const EvictionMasks& masks() const { return masks_; }
  int64_t requiredRows() const { return required_rows_; }
  // The rows each layer holds as the books count them: the storage's rows,
  // or, once moveRows() gathered them, every position the layer covers
  // (rows no kv head reads any more stay in the layout, masked).
  std::vector<int64_t> rowsPerLayer() const;
  // Whether moveRows() gathered the storage: its rows then no longer match
  // the layout's row for row (only a drafting copy's cache does this).
  bool rowsMoved() const { return rows_moved_; }

  // --- a forward's write ------------------------------------------------------
  // Runs `model` on `stream` (the tokens the cache should hold followed by
  // the new ones) into the storage: only the tokens not yet held are fed, at
  // explicit positions, unless the fault says otherwise (then unchecked, so
  // the fault shows). Records the written rows in the ledger and logs the
  // write (Append, or Refeed after a cut on purpose) at `round`; a forward
  // that throws logs nothing. `probes` sees the forward's probe points;
  // `copy_to`, a second empty cache, takes the rows this forward computed
  // (copyRows). Returns the logits, [logit_rows or fed, vocab].
  at::Tensor forward(const CausalLM& model, Phase phase, const std::vector<int64_t>& stream, int64_t round,
                     ProbeSink* probes, int64_t logit_rows, TrackedCache* copy_to = nullptr);
  // Writes rows computed elsewhere, as a forward on `stream` would: the rows
  // of the tokens not yet held (keys/values: per layer [kv_heads, fed,
  // head_dim] in the order fed), logged like a forward's write. Used when one
  // forward fills two caches (a drafter that shares the target's prefill).
  void copyRows(Phase phase, const std::vector<int64_t>& stream, int64_t round, const std::vector<at::Tensor>& keys,
                const std::vector<at::Tensor>& values);
  // A bonus token whose row is written by the next forward that feeds it.
  void expectBonusAt(int64_t position) { bonus_position_ = position; }

  // --- removals -------------------------------------------------------------
  // The cut after a round's acceptance (prune phase of `round`).
  void prune(int64_t round, const PruneRequestOfRound& request);
  // Sliding-window layers drop the rows the next query can no longer see;
  // one Evict event per group of layers that lose the same rows.
  void slideWindows(const Moment& moment);
  // Takes an eviction policy's keep decision (decided from storage(),
  // core/cache/cache_compression.h): the rows each kv head still reads and
  // the decision drops are masked, and one Evict event named `policy` lists
  // them; entries no head reads any more die. Nothing dropped: nothing
  // logged. Returns the rows masked.
  std::vector<RemovedRow> evict(const Moment& moment, const std::string& policy, const EvictionDecision& decision);
  // A compression of the cache just prefilled (a prefill's,
  // core/compress/prefill_compression.h): the eviction's decision taken,
  // demoted rows rewritten, pruned entries zeroed (compressCache), then one
  // Evict event named `name` with the rows kv heads stop reading (none when
  // rows were demoted or only entries pruned: those change entries in place),
  // logged even when it removed nothing.
  CompressionOutcome compress(const Moment& moment, const std::string& name, const CompressionRequest& request);
  // Lets `gather` move the storage's rows without changing what attention
  // reads through the books: compaction (KvCache::compact) and re-rotation of
  // the kept keys. `gather` returns how far the storage's positions then sit
  // before the sequence's (0 unless re-rotated): later writes are rotated for
  // position - shift, and crops cut by position. Logged by the compression
  // event before it, which says what the heads read; the ledger keeps each
  // entry's K/V as written. A session's audit reads storage rows by the
  // layout, so only a drafting copy nobody audits moves its rows.
  void moveRows(const std::function<int64_t(KvCache&)>& gather);

 private:
  // Plans feeding `stream`; sets the storage's fault switches.
  PlannedWrite planWrite(Phase phase, const std::vector<int64_t>& stream);
  // After the write: clears the switches, records the written rows in the
  // ledger (computed_k/v: per layer [kv_heads, fed, head_dim] as computed;
  // with pads, [kv_heads, pads + fed, head_dim] in row order) and logs the
  // write, then drops the pads a padded batch added after the inputs.
  void logWrite(const PlannedWrite& write, int64_t round, const std::vector<at::Tensor>& computed_k,
                const std::vector<at::Tensor>& computed_v, const AddedPadding& pads = {});
  int64_t recordBirthsChecked(const PlannedWrite& write, const std::vector<RowIdentity>& identities,
                              const std::vector<at::Tensor>& computed_k, const std::vector<at::Tensor>& computed_v,
                              const std::vector<int64_t>& store_order, int64_t round, CacheEvent& event);
  int64_t recordPlainBirths(const PlannedWrite& write, const std::vector<RowIdentity>& identities, int64_t m,
                            int64_t round);
  // A padded forward's identities in row order: pads before, the written
  // inputs, pads after.
  static std::vector<RowIdentity> writtenIdentities(const PlannedWrite& write, const AddedPadding& pads);
  // The pad rows a forward hid from its real queries (ledger entries): the
  // cache's pad rows unless `hides_prefix` is false (a fault), and always
  // the new pads after the inputs (they follow every real query).
  std::vector<int64_t> hiddenPadding(const CacheEvent& append, bool hides_prefix, int64_t pads_after) const;
  // Drops the last `count` rows of every layer: the pads a padded batch
  // added after a forward's inputs, logged as one DropPadding event.
  void dropPadding(const Moment& moment, int64_t count);
  // One Evict event named `policy` for the rows kv heads stopped reading.
  void logMasked(const Moment& moment, const std::string& policy, const std::vector<RemovedRow>& removed);
  void logEvent(CacheEvent event);
  // A paged cache: the blocks its table maps that its sequence does not own
  // (freed, handed to another sequence, or mapped twice); empty otherwise.
  std::vector<DanglingBlock> danglingBlocks() const;
  // A paged cache: sets the event's overwritten_rows, the rows held in
  // blocks another sequence wrote into since the last check whose stored
  // K/V no longer equal what the ledger recorded when they were written.
  void noteOverwrittenRows(CacheEvent& event);
  CacheEvent eventAt(const Moment& moment, CacheEventKind kind) const;
  // Entries `before` held that no layer of `after` holds, in first-seen order.
  static std::vector<int64_t> entriesLost(const CacheLayout& before, const CacheLayout& after);
  void clearSwitches();

  std::unordered_map<int64_t, int64_t> foreign_writes_seen_;  // per pool block: foreign writes already checked
  CacheRole role_;
  std::unique_ptr<KvCache> storage_;
  std::vector<int64_t> windows_;
  const FaultPolicy& faults_;
  KvLedger& ledger_;
  CacheEventLog& log_;
  ForwardRunner* runner_ = &directForwards();

  CacheLayout layout_;
  EvictionMasks masks_;
  std::vector<int64_t> believed_;        // the tokens the engine thinks the cache holds
  int64_t required_rows_ = 0;            // rows the bookkeeping requires now
  std::vector<int64_t> required_first_;  // per layer, the first position required (sliding windows)
  int64_t refeed_pending_ = 0;           // rows cut on purpose (seed bookkeeping), to be re-fed
  int64_t bonus_position_ = -1;          // a bonus token not yet written
  int64_t position_shift_ = 0;           // stale-rope: positions not rewound after rollbacks
  bool rows_moved_ = false;              // moveRows() gathered the storage
  int64_t storage_shift_ = 0;            // sequence position - storage position (re-rotated rows)
};

}  // namespace kvscope
