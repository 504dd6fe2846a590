#pragma once
// A paged cache's block pool as the GUI draws it (docs/paged-cache.md): every
// block of the pool with its owner sequence (or free) and the rows it holds
// (position and token per offset, from the owner's books), every sequence's
// block table (logical block -> pool block, and whether the entry dangles:
// freed while still mapped, the free-mapped fault), and the pool's block log.
// Torch-free and Qt-free: a snapshot carries it to the GUI.
//
// poolViewOf reads the pool as it stands (the live end of the session);
// the pool at any earlier moment is its log replayed to that moment
// (core/snapshot/pool_history.h), which gives the same struct.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cache/block_log.h"
#include "core/trace/trace_types.h"

namespace kvscope {

class Session;

// One offset of a block that holds a row of its owner's cache (layer 0).
struct PoolRow {
  int64_t offset = 0;
  int64_t position = 0;  // the position the row was written for (the owner's ledger)
  int64_t token = 0;
};

struct PoolBlock {
  int64_t block = 0;
  int64_t owner = -1;    // the sequence that owns it; -1 while free
  int64_t logical = -1;  // its index in the owner's block table; -1 when free
  std::vector<PoolRow> rows;  // the offsets that hold one of the owner's rows, in offset order
  int64_t last_log = -1;      // index into PoolView::log of its last operation; -1: none kept
};

struct PoolTableEntry {
  int64_t logical = 0;  // the sequence's rows [logical * block_size, (logical + 1) * block_size)
  int64_t block = 0;    // the pool block they live in
  // Freed while still mapped (the free-mapped fault): the pool may have handed
  // the block to another sequence, whose rows this sequence then reads.
  bool dangling = false;
};

struct PoolSequenceTable {
  int64_t sequence = 0;
  int64_t rows = 0;  // rows its cache holds (layer 0)
  std::vector<PoolTableEntry> entries;
};

// One line of the pool's block log (core/cache/block_pool.h's BlockLogEntry).
struct PoolLogEntry {
  std::string operation;  // "allocate", "reuse", "free" or "unmap"
  int64_t block = 0;
  int64_t sequence = 0;
  int64_t first_position = 0;  // the first of the block_size rows it held for that sequence
  bool still_mapped = false;   // a free that left the block in the sequence's table
  BlockMoment moment;          // the round, phase and cache event it happened in
};

PoolLogEntry poolLogEntryOf(const BlockLogEntry& entry);

// Where one row of a sequence lives in the pool.
struct PoolPlace {
  int64_t logical = 0;
  int64_t block = 0;
  int64_t offset = 0;
  bool dangling = false;
};

struct PoolView {
  CacheRole cache = CacheRole::Target;
  int64_t block_size = 0;
  std::vector<PoolBlock> blocks;          // every block of the pool, by number
  std::vector<PoolSequenceTable> tables;  // every sequence that shares the pool, by sequence id
  std::vector<PoolLogEntry> log;          // the pool's most recent operations, oldest first
  int64_t dropped_log = 0;                // older operations the pool no longer keeps
  // The moment shown: the pool just after that phase ran; nullopt for the
  // pool as it stands (the live end of the run).
  std::optional<Moment> moment;
  // The moment is older than the pool's log reaches (it dropped operations
  // made after it): the view is the pool at the oldest moment it can rebuild.
  bool before_log = false;

  int64_t freeBlocks() const;
  int64_t blocksOwnedBy(int64_t sequence) const;
  const PoolSequenceTable* table(int64_t sequence) const;
  // The block and offset of row `row` of `sequence`; nullopt past its table.
  std::optional<PoolPlace> placeOfRow(int64_t sequence, int64_t row) const;
};

// The pool the sequences' `cache` caches share, as the run left it; nullopt
// when those caches are contiguous or absent (no pool to show). `sequences`
// are every session of one batch (or the one session), in sequence order.
std::optional<PoolView> poolViewOf(const std::vector<const Session*>& sequences, CacheRole cache);

// "sequence 2", "free": who owns a block, in words.
std::string poolOwnerName(int64_t owner);

}  // namespace kvscope
