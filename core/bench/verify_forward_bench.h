#pragma once
// What a verify forward costs against a decode step, the model alone: a
// forward of gamma + 1 rows over a cache of `context` rows, timed in pairs
// with a one-row step at the same context (the order alternating), the
// median of the pairs' ratios. This is v without the session around it
// (the ledger, the drafter's forwards that evict the target's weights from
// the caches): the benchmark's speculative rows report v as the session
// sees it beside this.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bench/timing.h"
#include "core/model/causal_lm.h"

namespace kvscope {

// One entry per gamma: rows, the step's and the forward's times (medians of
// the pairs) and forward / step (median, min, max over the pairs). `ids`
// must hold context + max(gammas) + 1 ids. pairs: how many pairs per gamma.
nlohmann::json benchVerifyForwards(const CausalLM& model, const std::vector<int64_t>& ids, int64_t context,
                                   const std::vector<int64_t>& gammas, int pairs);

}  // namespace kvscope
