#pragma once
// A fault is a policy on cache operations: the engine asks what a prune, a
// feed or a write should do, and a FaultPolicy for Fault::None answers what
// a correct engine does. Every other fault changes one answer, and says how
// in `fault_action`, which the cache event log keeps next to the operation.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cache/cache_event_log.h"
#include "core/cache/fault.h"
#include "core/cache/cache_types.h"

namespace kvscope {

struct PruneRequest {
  CacheRole cache = CacheRole::Target;
  int64_t believed = 0;  // entries the engine believes the cache holds
  int64_t keep = 0;      // entries the bookkeeping keeps
  int64_t accepted = 0;  // n, drafts accepted this round
  int64_t layers = 0;
  // In a batch: the most drafts any sequence accepted this round (-1 alone),
  // and whether this is the batch's last sequence.
  int64_t batch_most_accepted = -1;
  bool last_in_batch = false;
};

struct PruneAction {
  int64_t believed_after = 0;  // what the engine believes afterwards
  int64_t crop_to = -1;        // the physical length to cut to; -1: no crop
  int64_t layers_cropped = 0;  // the first layers cut (all of them when correct)
  int64_t position_shift = 0;  // positions later writes are rotated ahead of where they are (uniform advance)
  CacheEventKind kind = CacheEventKind::Crop;
  DeathReason reason = DeathReason::RejectedDraft;
  std::string fault_action;
};

struct WriteRequest {
  CacheRole cache = CacheRole::Target;
  Phase phase = Phase::Prefill;
  int64_t rows = 0;         // rows the forward computes
  int64_t cache_rows = 0;   // rows already in the cache (layer 0)
  int64_t bonus_index = -1; // index among them of a bonus token not yet written, or -1
};

struct WritePlan {
  std::optional<std::vector<int64_t>> order;  // rows written, in physical order; none: all, in order
  bool causal_among_new = true;
  std::string fault_action;
};

struct WindowPlan {
  int64_t keep_before_query = 0;  // rows kept from before the next query's position
  std::string fault_action;
};

class FaultPolicy {
 public:
  explicit FaultPolicy(Fault fault = Fault::None) : fault_(fault) {}
  Fault fault() const { return fault_; }
  bool active() const { return fault_ != Fault::None; }

  PruneAction prune(const PruneRequest& request) const;
  WritePlan write(const WriteRequest& request) const;
  // Where a feed starts: the believed length, or 0 when the fault feeds the
  // whole prefix again on top of the cache.
  int64_t feedStart(CacheRole cache, Phase phase, int64_t believed) const;
  // False when positions are not rewound after a rollback (stale RoPE).
  bool rewindsPositions() const { return fault_ != Fault::StaleRope; }
  bool halfPrecisionStorage() const { return fault_ == Fault::HalfCache; }
  // True when a paged cache's rollback frees blocks its table keeps mapping
  // (the target's: the verify's rollback is where serving engines free).
  bool freesMappedBlocks(CacheRole cache) const {
    return fault_ == Fault::FreedBlockReused && cache == CacheRole::Target;
  }
  // Whether a forward of `phase` hides a padded cache's pad rows: always,
  // but after the prefill under padding-mask-dropped.
  bool masksPadding(Phase phase) const { return fault_ != Fault::PaddingMaskDropped || phase == Phase::Prefill; }
  // The rows a sliding-window layer of `window` keys keeps before the next
  // query: window - 1 (the query itself is the window's last key).
  WindowPlan window(CacheRole cache, int64_t window) const;

 private:
  Fault fault_;
};

}  // namespace kvscope
