#pragma once
// The bug zoo: injectable cache bugs that reproduce real ones. Each is named,
// switchable at run time, and explained (what it breaks, which real bug it
// mirrors). What each one does to cache operations is FaultPolicy's business
// (core/cache/fault_policy.h); this file is the catalogue.
#include <string>
#include <vector>

namespace kvscope {

enum class Fault {
  None,
  NoPrune,              // rejected drafts stay in the target cache
  PruneShort,           // one entry too few removed
  PruneLongNoRefeed,    // one entry too many removed, the missing token never re-fed
  ResetNotRollback,     // the whole cache cleared instead of rolled back
  CropZeroNoop,         // a prune whose arithmetic gives 0 leaves the cache unchanged
  StaleRope,            // positions after a rollback are not rewound
  PartialLayerCrop,     // only some layers are cropped
  FullPrefixWithCache,  // the whole prefix is fed again with a non-empty cache
  DrafterNotPruned,     // only the target is rolled back
  HalfCache,            // K/V stored in fp16 (drift, not a logic bug)
  BonusNotFed,          // after a fully accepted round the bonus token's row is never written
  VerifyMaskLeak,       // verify drafts see the drafts after them (no causal mask among new rows)
  AppendReversed,       // a multi-row append writes its rows in reverse order
  WindowRollEarly,      // a sliding-window cache drops its oldest row one step early
  UniformAdvance,       // a batch advances every sequence by the best sequence's acceptance
  LengthNotRolledBack,  // a batch's rollback forgets the last sequence's length
  FreedBlockReused,     // a paged rollback frees blocks its table still maps; the pool hands them out again
  PaddingMaskDropped,   // a padded batch masks its pad rows at the prefill only; later forwards attend them
};

struct FaultInfo {
  Fault fault;
  const char* name;         // the CLI / GUI name, e.g. "prune-short"
  const char* breaks;       // what goes wrong
  const char* real_world;   // the real bug it mirrors
};

const std::vector<FaultInfo>& allFaults();
const FaultInfo& faultInfo(Fault fault);
// True for faults that act only on sliding-window layers.
bool needsSlidingWindow(Fault fault);
// True for faults that act only when several sequences are decoded together
// (core/decode/batch_session.h); a single sequence never shows them.
bool needsBatch(Fault fault);
// True for faults that act only on a paged cache (--cache-layout paged).
bool needsPagedCache(Fault fault);
// True for faults that act only on a padded batch (--batch-layout padded).
bool needsPaddedBatch(Fault fault);
// True for faults a padded batch cannot carry: they change which of a
// forward's rows are written or what its new rows see, and the pads a
// padded batch adds are among those rows.
bool breaksPaddedWrites(Fault fault);
// "none" or a name from allFaults(); throws Error listing the names otherwise.
Fault parseFault(const std::string& name);

}  // namespace kvscope
