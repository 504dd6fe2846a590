#include "core/cache/eviction_settings.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace kvscope {

namespace {

constexpr int64_t kSnapkvDefaultWindow = 16;

}  // namespace

int64_t EvictionBudget::rowsOf(int64_t length) const {
  if (length <= 0) return 0;
  if (rows > 0) return std::min(rows, length);
  return std::clamp<int64_t>(std::llround(fraction * static_cast<double>(length)), 1, length);
}

void EvictionSettings::validate() const {
  if (budget.rows < 0) throw Error("--budget-rows must be >= 1, got " + std::to_string(budget.rows));
  if (budget.rows == 0 && !(budget.fraction > 0 && budget.fraction <= 1)) {
    throw Error("--budget must be a fraction of the rows in (0, 1], got " + formatNumber(budget.fraction));
  }
  if (sinks < 0) throw Error("--sinks must be >= 0, got " + std::to_string(sinks));
  if (window < -1 || window == 0) throw Error("--window must be >= 1, got " + std::to_string(window));
  if (kernel < 1 || kernel % 2 == 0) throw Error("--kernel must be odd and >= 1, got " + std::to_string(kernel));
  if (demote_bits != 0 && demote_bits != 4 && demote_bits != 8) {
    throw Error("--demote must be 8 or 4 (bits of the demoted copies), got " + std::to_string(demote_bits));
  }
  // TOVA's decode steps evict against the budget, and demoted rows would count
  // as kept: the cache would stay over budget and lose a demoted row per step.
  if (demote_bits != 0 && evictsPerStep(policy)) {
    throw Error(std::string("--demote does not combine with --policy ") + evictionPolicyName(policy) +
                " (its decode steps evict rows)");
  }
}

int64_t EvictionSettings::recentWindow(int64_t keep, int64_t queries) const {
  switch (evictionPolicyInfo(policy).window) {
    case PolicyWindow::RecentRows:
      return window > 0 ? std::min(window, keep) : keep / 2;
    case PolicyWindow::LastQueries:
      return std::min(window > 0 ? window : kSnapkvDefaultWindow, queries);
    case PolicyWindow::None:
      return 0;
  }
  return 0;
}

}  // namespace kvscope
