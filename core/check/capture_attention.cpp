#include "core/check/capture_attention.h"

#include <torch/torch.h>

#include "core/cache/kv_cache.h"
#include "core/capture/capture_shard.h"
#include "core/error.h"
#include "core/model/probe.h"

namespace kvscope {

namespace {

// The target's layout just before step `step` (empty before its first event).
std::vector<std::vector<int64_t>> layoutBefore(const CaptureTimeline& timeline, size_t step) {
  for (size_t s = step; s-- > 0;) {
    if (timeline.steps[s].role == CaptureRole::Target) return timeline.event(s).layout;
  }
  return {};
}

// A cache holding, per layer, the captured rows of `layout` (ledger K/V).
std::unique_ptr<KvCache> cacheOf(const CaptureTimeline& timeline, const std::vector<std::vector<int64_t>>& layout,
                                 const CausalLM& target) {
  auto cache = target.makeCache(torch::kFloat32);
  const KvLedger& ledger = timeline.record.ledger;
  for (size_t l = 0; l < layout.size() && static_cast<int64_t>(l) < cache->numLayers(); ++l) {
    if (layout[l].empty()) continue;
    std::vector<at::Tensor> k, v;
    for (int64_t entry : layout[l]) {
      const int64_t row = ledger.entry(entry).row;
      k.push_back(ledger.keys(row).select(0, static_cast<int64_t>(l)));    // [kv_heads, head_dim]
      v.push_back(ledger.values(row).select(0, static_cast<int64_t>(l)));  // [kv_heads, head_dim]
    }
    cache->append(static_cast<int64_t>(l), torch::stack(k, 1), torch::stack(v, 1));  // [kv_heads, n, head_dim]
  }
  return cache;
}

// The call kept every input as a new row at the end of every layer (an
// append cache): the replay's keys are then the rows the views show.
bool appendedInputs(const std::vector<std::vector<int64_t>>& before, const CacheEvent& after, int64_t inputs) {
  if (after.layout.size() != before.size() && !before.empty()) return false;
  for (size_t l = 0; l < after.layout.size(); ++l) {
    const size_t held = before.empty() ? 0 : before[l].size();
    if (after.layout[l].size() != held + static_cast<size_t>(inputs)) return false;
  }
  return true;
}

}  // namespace

CaptureAttention replayVerifyAttention(const CaptureFile& file, const CaptureTimeline& timeline, const CausalLM& target) {
  CaptureAttention out;
  if (file.manifest().shard) {  // one rank's rows hold some KV heads: the model's attention needs them all
    out.notes.push_back("Verify Attention: " + describeShard(file.manifest()) +
                        " holds some of the KV heads; attention is not recomputed from one rank's rows");
    return out;
  }
  c10::InferenceMode guard;
  int64_t skipped = 0;
  for (size_t s = 0; s < timeline.steps.size(); ++s) {
    const CaptureStep& step = timeline.steps[s];
    if (step.role != CaptureRole::Target || step.operation != CaptureOperation::Forward || step.call == 0 ||
        step.uncached) {
      continue;
    }
    const auto before = layoutBefore(timeline, s);
    if (step.static_cache || !appendedInputs(before, timeline.event(s), step.inputs)) {
      ++skipped;
      continue;
    }
    const std::vector<int64_t>& inputs = file.manifest().calls.at(step.manifest_call).input_ids;
    auto cache = cacheOf(timeline, before, target);
    AttentionRecorder recorder(target.config().num_layers);
    at::Tensor logits;
    try {
      logits = target.forwardUnchecked(torch::tensor(inputs, torch::kInt64), step.claimed_start, cache.get(), &recorder);
    } catch (const Error& error) {  // positions past the model's range, say: the view goes without this round
      out.notes.push_back("Verify Attention: target call " + std::to_string(step.call) + " could not be replayed: " +
                          error.what());
      continue;
    }
    VerifyRecord verify;
    verify.first_query_position = step.true_start;
    verify.logits = logits.to(torch::kFloat32);
    for (const at::Tensor& w : recorder.weights) verify.attention.push_back(w.to(torch::kFloat32));
    for (const at::Tensor& m : recorder.masks) verify.masks.push_back(m);
    out.verify[step.round] = std::move(verify);
  }
  if (skipped > 0) {
    out.notes.push_back("Verify Attention: " + std::to_string(skipped) +
                        " target calls wrote into a fixed-size buffer (or wrote fewer rows than inputs); their "
                        "attention is not recomputed");
  }
  return out;
}

}  // namespace kvscope
