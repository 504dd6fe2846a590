#include "core/bench/verify_forward_bench.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

struct PairTimes {
  std::vector<double> step_ms, forward_ms, ratio;
};

// A forward of `rows` ids at position `context`, the cache cut back to
// `context` rows after it (untimed).
double timedForward(const CausalLM& model, KvCache& cache, const at::Tensor& ids, int64_t context) {
  const double ms = elapsedMs([&] { model.forward(ids, context, &cache, nullptr, ids.size(0)); });
  cache.crop(context);
  return ms;
}

PairTimes timePairs(const CausalLM& model, KvCache& cache, const std::vector<int64_t>& ids, int64_t context,
                    int64_t rows, int pairs) {
  const at::Tensor step = idsTensor({ids[static_cast<size_t>(context)]});
  const at::Tensor verify = idsTensor(std::vector<int64_t>(ids.begin() + context, ids.begin() + context + rows));
  timedForward(model, cache, step, context);  // warm-up: the workspace grows to `rows` once
  timedForward(model, cache, verify, context);
  PairTimes t;
  for (int p = 0; p < pairs; ++p) {
    double s = 0, f = 0;
    if (p % 2 == 0) {
      s = timedForward(model, cache, step, context);
      f = timedForward(model, cache, verify, context);
    } else {
      f = timedForward(model, cache, verify, context);
      s = timedForward(model, cache, step, context);
    }
    t.step_ms.push_back(s);
    t.forward_ms.push_back(f);
    t.ratio.push_back(f / s);
  }
  return t;
}

}  // namespace

nlohmann::json benchVerifyForwards(const CausalLM& model, const std::vector<int64_t>& ids, int64_t context,
                                   const std::vector<int64_t>& gammas, int pairs) {
  require(pairs >= 1, "bench: verify forwards need at least one pair");
  c10::InferenceMode guard;
  auto cache = model.makeCache();
  model.forward(idsTensor(std::vector<int64_t>(ids.begin(), ids.begin() + context)), 0, cache.get(), nullptr, 0);
  nlohmann::json out = nlohmann::json::array();
  for (int64_t gamma : gammas) {
    const int64_t rows = gamma + 1;
    require(context + rows <= static_cast<int64_t>(ids.size()), "bench: too few ids for a verify of " +
                                                                     std::to_string(rows) + " rows");
    const PairTimes t = timePairs(model, *cache, ids, context, rows, pairs);
    const Timing ratio = timingOf(t.ratio);
    out.push_back({{"gamma", gamma},
                   {"rows", rows},
                   {"step_ms", median(t.step_ms)},
                   {"forward_ms", median(t.forward_ms)},
                   {"forward_over_step", {{"median", ratio.median_ms}, {"min", ratio.min_ms}, {"max", ratio.max_ms}}}});
  }
  return out;
}

}  // namespace kvscope
