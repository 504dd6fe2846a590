#include "core/cache/fault_policy.h"

#include <algorithm>
#include <numeric>

namespace kvscope {

PruneAction FaultPolicy::prune(const PruneRequest& r) const {
  const bool target = r.cache == CacheRole::Target;
  PruneAction a;
  a.believed_after = std::min(r.keep, r.believed);
  a.layers_cropped = r.layers;
  if (fault_ == Fault::PruneLongNoRefeed && target) {
    // Off by one the other way: one more entry is always dropped, never re-fed.
    a.crop_to = std::max<int64_t>(0, a.believed_after - 1);
    a.fault_action = "removed one row more than the bookkeeping allows; the lost token is never re-fed";
    return a;
  }
  if (r.keep >= r.believed) return a;  // nothing to drop
  a.crop_to = r.keep;
  if ((fault_ == Fault::NoPrune && target) || (fault_ == Fault::DrafterNotPruned && !target)) {
    a.crop_to = -1;
    a.fault_action = "the crop was skipped: the rejected rows stay";
  } else if (fault_ == Fault::CropZeroNoop && r.accepted == 0) {
    a.crop_to = -1;
    a.fault_action = "the crop computed 0 rows to keep beyond the round start and treated it as a no-op";
  } else if (fault_ == Fault::PruneShort && target) {
    a.crop_to = r.keep + 1;
    a.fault_action = "removed one row too few";
  } else if (fault_ == Fault::ResetNotRollback && target) {
    a.crop_to = 0;
    a.kind = CacheEventKind::Reset;
    a.reason = DeathReason::Reset;
    a.fault_action = "cleared the whole cache instead of rolling back";
  } else if (fault_ == Fault::UniformAdvance && target && r.batch_most_accepted > r.accepted) {
    // The batch's offset moved by the best sequence's count: this one keeps
    // that many more rows than it accepted, and its positions run ahead.
    const int64_t extra = std::min(r.batch_most_accepted - r.accepted, r.believed - r.keep);
    a.crop_to = r.keep + extra;
    a.position_shift = extra;
    a.fault_action = "advanced the offset by the " + std::to_string(r.batch_most_accepted) +
                     " drafts the batch's best sequence accepted, not this sequence's " + std::to_string(r.accepted) +
                     ": " + std::to_string(extra) + " rejected draft row(s) stay and later positions run " +
                     std::to_string(extra) + " ahead";
  } else if (fault_ == Fault::LengthNotRolledBack && target && r.last_in_batch) {
    a.crop_to = -1;
    a.fault_action = "the batch's rollback skipped this sequence (the last of the batch): its length was not cut "
                     "and its rejected rows stay";
  } else if (fault_ == Fault::PartialLayerCrop && target) {
    a.layers_cropped = (r.layers + 1) / 2;
    a.fault_action = "cropped only layers 0.." + std::to_string(a.layers_cropped - 1);
  }
  return a;
}

WritePlan FaultPolicy::write(const WriteRequest& r) const {
  WritePlan plan;
  if (fault_ == Fault::AppendReversed && r.rows > 1) {
    plan.order.emplace(static_cast<size_t>(r.rows));
    std::iota(plan.order->rbegin(), plan.order->rend(), int64_t{0});
    plan.fault_action = "wrote the " + std::to_string(r.rows) + " rows in reverse order";
  } else if (fault_ == Fault::BonusNotFed && r.bonus_index >= 0 && r.bonus_index < r.rows && r.cache_rows > 0) {
    plan.order.emplace();
    for (int64_t i = 0; i < r.rows; ++i) {
      if (i != r.bonus_index) plan.order->push_back(i);
    }
    plan.fault_action = "did not write the bonus token's row";
  } else if (fault_ == Fault::VerifyMaskLeak && r.cache == CacheRole::Target && r.phase == Phase::Verify &&
             r.rows > 1) {
    plan.causal_among_new = false;
    plan.fault_action = "no causal mask among the " + std::to_string(r.rows) + " rows appended";
  }
  return plan;
}

WindowPlan FaultPolicy::window(CacheRole cache, int64_t window) const {
  WindowPlan plan;
  plan.keep_before_query = std::max<int64_t>(0, window - 1);
  if (fault_ == Fault::WindowRollEarly && cache == CacheRole::Target && window > 1) {
    plan.keep_before_query = window - 2;
    plan.fault_action = "the window rolled one step early: kept " + std::to_string(window - 2) +
                        " rows before the next query where a window of " + std::to_string(window) + " needs " +
                        std::to_string(window - 1);
  }
  return plan;
}

int64_t FaultPolicy::feedStart(CacheRole cache, Phase phase, int64_t believed) const {
  if (fault_ == Fault::FullPrefixWithCache && cache == CacheRole::Target && phase == Phase::Verify) return 0;
  return believed;
}

}  // namespace kvscope
