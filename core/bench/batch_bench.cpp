#include "core/bench/batch_bench.h"

#include <algorithm>
#include <chrono>

#include "core/bench/timing.h"
#include "core/decode/batch_session.h"
#include "core/error.h"

namespace kvscope {
namespace {

struct Trial {
  double tokens_per_second = 0;
  double alpha = 0;
  int64_t tokens = 0;
};

Trial runOnce(const std::shared_ptr<const CausalLM>& target, const std::shared_ptr<const Drafter>& drafter,
              const std::vector<std::vector<int64_t>>& prompts, const SessionOptions& options) {
  BatchSession batch(target, drafter, prompts, options, {});
  const auto start = std::chrono::steady_clock::now();
  batch.runToEnd();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Trial t;
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Metrics m = batch.sequence(i).metrics();
    t.tokens += m.generated;
    drafted += m.drafted;
    accepted += m.accepted;
  }
  t.tokens_per_second = seconds > 0 ? static_cast<double>(t.tokens) / seconds : 0;
  t.alpha = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0;
  return t;
}

}  // namespace

double BatchBenchResult::speedupOverOne(int64_t batch, bool speculative) const {
  double one = 0, that = 0;
  for (const BatchBenchRow& r : rows) {
    if (r.speculative != speculative) continue;
    if (r.batch == 1) one = r.median_tokens_per_second;
    if (r.batch == batch) that = r.median_tokens_per_second;
  }
  return one > 0 ? that / one : 0;
}

BatchBenchResult runBatchBench(const std::shared_ptr<const CausalLM>& target, const std::shared_ptr<const Drafter>& drafter,
                               const std::vector<std::vector<int64_t>>& prompts, const BatchBenchPlan& plan) {
  require(!plan.batch_sizes.empty(), "bench-batch: no batch sizes");
  require(plan.trials >= 1 && plan.trials <= 100, "bench-batch: trials must be 1-100");
  const int64_t largest = *std::max_element(plan.batch_sizes.begin(), plan.batch_sizes.end());
  require(static_cast<int64_t>(prompts.size()) >= largest,
          "bench-batch: " + std::to_string(prompts.size()) + " prompts for a batch of " + std::to_string(largest));
  SessionOptions options;
  options.max_new_tokens = plan.new_tokens;
  options.gamma = std::max<int64_t>(1, plan.gamma);
  options.ignore_eos = true;
  options.record_attention = false;
  options.record_logits = false;
  options.validate();

  BatchBenchResult result;
  result.plan = plan;
  for (int64_t b : plan.batch_sizes) {
    require(b >= 1 && b <= BatchSession::kMaxSequences, "bench-batch: batch size " + std::to_string(b) + " out of range");
    for (bool speculative : {false, true}) {
      if (speculative && !drafter) continue;
      BatchBenchRow row;
      row.batch = b;
      row.speculative = speculative;
      result.rows.push_back(row);
    }
  }
  std::vector<std::vector<double>> alphas(result.rows.size());
  // Trial 0 warms every configuration up and is not kept; then the
  // configurations take turns, trial by trial.
  for (int trial = 0; trial <= plan.trials; ++trial) {
    for (size_t k = 0; k < result.rows.size(); ++k) {
      BatchBenchRow& row = result.rows[k];
      const std::vector<std::vector<int64_t>> batch_prompts(prompts.begin(), prompts.begin() + row.batch);
      const Trial t = runOnce(target, row.speculative ? drafter : nullptr, batch_prompts, options);
      if (trial == 0) continue;
      row.tokens_per_second.push_back(t.tokens_per_second);
      row.tokens = t.tokens;
      alphas[k].push_back(t.alpha);
    }
  }
  for (size_t k = 0; k < result.rows.size(); ++k) {
    result.rows[k].median_tokens_per_second = median(result.rows[k].tokens_per_second);
    result.rows[k].median_alpha = median(alphas[k]);
  }
  return result;
}

}  // namespace kvscope
