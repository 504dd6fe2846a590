#pragma once
// The cache operation log: every operation on a cache (append, re-feed, crop,
// reset, eviction, and what an injected fault did to it) as an event with its
// round, phase, the rows per layer before and after, and the number of rows
// the session's bookkeeping required afterwards. Replaying the events gives
// the physical layout of any layer at any moment: which ledger entry each row
// holds. Torch-free plain records, so the trace file and the GUI read them.
//
// Rows are not positions: under a cache bug row i need not hold position i,
// and layers need not agree. The layout is what the model actually attended to.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/cache/cache_types.h"

namespace kvscope {

enum class CacheEventKind {
  Append,  // rows written by a forward
  Refeed,  // an append that re-writes tokens an earlier prune removed on purpose
  Crop,    // the cache cut back to a length (a rollback after verification)
  Reset,   // the cache cleared
  Evict,   // rows removed by an eviction policy
  // A padded batch's pad rows dropped right after the forward that wrote
  // them (the pads a narrower sequence got to reach the call's width).
  DropPadding,
  // Another engine's cache rewritten otherwise (a capture: rows written in
  // place, a ring buffer rolled, a slice that keeps a sub-sequence). Such an
  // event gives its resulting rows outright (CacheEvent::layout). Never in a
  // session or a trace: parseCacheEventKind refuses it.
  Rewrite,
};
const char* cacheEventKindName(CacheEventKind kind);
CacheEventKind parseCacheEventKind(const std::string& name);  // throws Error

// What one layer of a cache must hold: positions [first, end) in rows 0, 1,
// ... in order. first > 0 only for a sliding window's layers.
struct RowContract {
  int64_t first = 0;
  int64_t end = 0;
  int64_t rows() const { return end > first ? end - first : 0; }
};

// One row an eviction policy masked: kv head `kv_head` of layer `layer` stops
// reading ledger entry `entry`. The row stays where it is (KvCache keep mask).
struct MaskedRow {
  int64_t entry = 0;
  int64_t layer = 0;
  int64_t kv_head = 0;
  double score = 0;  // the policy's score of the row (higher = more worth keeping)
};

// A block a paged cache's table still maps that its sequence does not own
// (docs/paged-cache.md): the pool freed it, or handed it to another
// sequence, so whatever is written there next may be another's rows.
struct DanglingBlock {
  int64_t block = 0;      // the pool block
  int64_t first_row = 0;  // the first row the table maps through it
  int64_t rows = 0;       // how many rows it maps (the block size)
  int64_t owner = -1;     // the sequence the pool gave it to, or -1: on the free list
};

struct CacheEvent {
  CacheRole cache = CacheRole::Target;
  int64_t round = 0;
  Phase phase = Phase::Prefill;
  CacheEventKind kind = CacheEventKind::Append;
  std::vector<int64_t> rows_before;  // per layer
  std::vector<int64_t> rows_after;   // per layer
  // The rows the session's bookkeeping requires after this operation
  // (docs/architecture.md, "Speculative rounds, exactly").
  int64_t expected_rows = 0;
  // Per layer, the first position the bookkeeping requires (a sliding window
  // drops the positions before it); empty when every layer starts at 0. Layer
  // l must hold positions [expectedFirst(l), expected_rows) in rows 0, 1, ...
  std::vector<int64_t> expected_first;
  // The layers the operation touched; empty = every layer. A sliding window
  // evicts only from its own layers (Gemma 2 alternates local and global).
  std::vector<int64_t> layers;
  // Append / Refeed: the ledger entries written, in physical row order; layer
  // l holds them at rows [rows_before[l], rows_before[l] + written.size()).
  std::vector<int64_t> written;
  // Append / Refeed: inputs the forward was fed but whose rows it did not
  // write (a fault), as (token, rotary position): a capture lists every input.
  std::vector<std::pair<int64_t, int64_t>> unwritten;
  // Crop / Reset / Evict: ledger entries removed (any layer), and why. A
  // policy's Evict lists the entries that died: masked in every kv head of
  // every layer holding them (they still occupy their rows).
  std::vector<int64_t> removed;
  DeathReason reason = DeathReason::Alive;
  // Evict by an eviction policy (core/decode/session_eviction.h): its name
  // ("h2o") and, per (entry, layer, kv head), the rows it masked. Such an
  // event moves no row (rows_after == rows_before); a sliding window's Evict
  // (policy empty) drops rows from the front instead.
  std::string policy;
  std::vector<MaskedRow> masked;
  // What an injected fault did to this operation ("" when nothing).
  std::string fault_action;
  // Append: max |stored - computed| over the written K/V (storage precision).
  double max_store_error = 0;
  // When not empty, the entries every layer holds after this operation, in
  // row order: a capture of another engine gives each state outright
  // (core/check/capture_timeline.h). Replay then takes it as is.
  std::vector<std::vector<int64_t>> layout;
  // A capture's call this event stands for ("drafter call 7", "target call
  // 3, between calls"): rounds of another engine are inferred, its calls are
  // what the user's code made. Empty in sessions and traces.
  std::string call;
  // A paged cache: the blocks its table maps after this operation that its
  // sequence does not own (empty when every mapped block is its own, and in
  // a contiguous cache).
  std::vector<DanglingBlock> dangling_blocks;
  // A paged cache: rows (of any layer) whose stored K/V another sequence
  // overwrote since the cache's previous operation (it wrote into a block
  // this sequence owns), and the last such writer.
  std::vector<int64_t> overwritten_rows;
  int64_t overwritten_by = -1;
  // Append / Refeed of a padded batch's cache: the pad rows (ledger entries)
  // the forward's attention hid from its real queries. A pad row the cache
  // holds that a forward does not list here was attended: the walker's
  // "padding" breach (docs/batching.md, "The padded layout").
  std::vector<int64_t> hidden_padding;

  Moment moment() const { return {round, phase}; }
  int64_t expectedFirst(int64_t layer) const {
    return expected_first.empty() ? 0 : expected_first.at(static_cast<size_t>(layer));
  }
  // What layer `layer` must hold after this operation.
  RowContract contract(int64_t layer) const { return {expectedFirst(layer), expected_rows}; }
  bool touches(int64_t layer) const;
  // A policy's eviction: masks rows, moves none.
  bool masksRows() const { return kind == CacheEventKind::Evict && !policy.empty(); }
  int64_t rowsAfter(int64_t layer) const { return rows_after.at(static_cast<size_t>(layer)); }
};

// The physical rows of every layer of one cache: layers[l][r] is the ledger
// entry held by row r of layer l.
struct CacheLayout {
  std::vector<std::vector<int64_t>> layers;

  int64_t rows(int64_t layer) const { return static_cast<int64_t>(layers.at(static_cast<size_t>(layer)).size()); }
  bool empty() const { return layers.empty(); }
};

class CacheEventLog {
 public:
  void record(CacheEvent event);
  const std::vector<CacheEvent>& events() const { return events_; }
  void restore(std::vector<CacheEvent> events);  // from a trace; checked
  void clear() { events_.clear(); }

  // Events [0, count) replayed for `cache` with `layers` layers.
  CacheLayout layoutAfterEvents(CacheRole cache, int64_t layers, size_t count) const;
  // The layout just after `moment` (every event at or before it).
  CacheLayout layoutAt(CacheRole cache, int64_t layers, const Moment& moment) const;
  // How many events happened at or before `moment`.
  size_t countAtOrBefore(const Moment& moment) const;
  // The rows required just after `moment` (0 before the first event).
  int64_t expectedRowsAt(CacheRole cache, const Moment& moment) const;
  // What `layer` must hold just after `moment`.
  RowContract contractAt(CacheRole cache, int64_t layer, const Moment& moment) const;
  // Layers of `cache` seen in the log (0 when it has no events).
  int64_t layerCount(CacheRole cache) const;

 private:
  std::vector<CacheEvent> events_;
};

// One line for an event: "round 1 prune (crop): target 15 -> 11 rows, 10
// required; fault: removed one row too few" (the fault part only with_fault).
std::string describeEvent(const CacheEvent& event, bool with_fault = true);

// Applies one event to a layout (the replay step; exposed for incremental walks).
void applyEvent(CacheLayout& layout, const CacheEvent& event);
// The same for one layer's rows only.
void applyEventToLayer(std::vector<int64_t>& rows, const CacheEvent& event, int64_t layer);

}  // namespace kvscope
