#pragma once
// Who a cache row is: the identity of one K/V row write (the token, the
// position it was computed for, the rotary position applied) and its life,
// from the operation that wrote it to the one that removed it. Torch-free:
// the GUI, the trace file and the audit read it; the ledger (kv_ledger.h)
// keeps one per row ever written, with its K/V.
#include <cstdint>

#include "core/cache/cache_types.h"

namespace kvscope {

// One K/V row write of one cache (all layers at once), from its birth to its
// death: its identity (the token, the position it was computed for, the
// rotary position actually applied) and when it was written and removed.
// Its K/V rows (all layers) are stored once, at birth, in the ledger. Which
// physical row it occupies in each layer comes from the cache event log.
struct LedgerEntry {
  CacheRole cache = CacheRole::Target;
  int64_t position = 0;       // the absolute position the engine computed it for (-1: a pad row)
  int64_t rope_position = 0;  // the position its rotary (or learned) embedding used
  int64_t token = 0;
  int64_t born_round = 0;
  Phase born_phase = Phase::Prefill;
  int64_t died_round = -1;  // -1 while some layer still holds it
  Phase died_phase = Phase::Prune;
  DeathReason reason = DeathReason::Alive;
  int64_t row = 0;  // index of its K/V rows in the ledger's store
  // A pad row of a padded batch (docs/batching.md): the pad token's K/V,
  // holding no position of the sequence; attention must never read it.
  bool padding = false;

  bool aliveAt(int64_t round) const { return born_round <= round && (died_round < 0 || died_round > round); }
};

}  // namespace kvscope
