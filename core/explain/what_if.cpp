#include "core/explain/what_if.h"

#include <torch/types.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "core/error.h"
#include "core/model/probe_recorder.h"
#include "core/model/rope.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

void checkPositions(const std::vector<int64_t>& positions, int64_t query_position, const std::string& what) {
  for (int64_t p : positions) {
    if (p >= 0 && p < query_position) continue;
    if (query_position == 0) {
      throw Error("what-if: cannot " + what + " " + std::to_string(p) +
                  ": the query at position 0 reads only its own row, which its forward writes");
    }
    throw Error("what-if: cannot " + what + " " + std::to_string(p) + ": the query at position " +
                std::to_string(query_position) + " can only lose earlier rows (valid: 0-" +
                std::to_string(query_position - 1) + "; row " + std::to_string(query_position) +
                " is written by the query's own forward)");
  }
}

void checkChannels(const std::vector<int64_t>& channels, int64_t head_dim, const std::string& which) {
  for (int64_t c : channels) {
    if (c < 0 || c >= head_dim) {
      throw Error("what-if: " + which + " channel " + std::to_string(c) + " is out of range (valid: 0-" +
                  std::to_string(head_dim - 1) + ")");
    }
  }
}

// longrope chooses its factor set per forward by the largest position. The
// what-if decodes P over a cache of 0..P-1; the explanation prefilled the
// whole prompt. Refuse when the two would rotate differently.
void checkRotaryAgrees(const ModelConfig& config, int64_t tokens, int64_t position) {
  if (config.rope_scaling.type != RopeScaling::Type::LongRope) return;
  const Rope rope(config);
  const bool prefill = rope.usesLongFactors(tokens - 1);
  const bool prefix = rope.usesLongFactors(std::max<int64_t>(position - 1, 0));
  const bool query = rope.usesLongFactors(position);
  if (prefill == prefix && prefix == query) return;
  throw Error("what-if at position " + std::to_string(position) + ": " + config.architecture_name +
              " uses longrope, whose rotary factors depend on the longest position of a forward: the prompt's " +
              std::to_string(tokens) + "-token prefill and a cached decode up to position " + std::to_string(position) +
              " would rotate with different factors (switch at original_max_position_embeddings = " +
              std::to_string(config.rope_scaling.original_max_position_embeddings) +
              "). Use a prompt and position on the same side of it");
}

// A deep copy: KvCache's members share storage when copied.
std::unique_ptr<KvCache> copyOf(const CausalLM& model, const KvCache& cache) {
  auto copy = model.makeCache(cache.storageDtype());
  for (int64_t layer = 0; layer < cache.numLayers(); ++layer) copy->append(layer, cache.keys(layer), cache.values(layer));
  return copy;
}

// Zeroes the chosen channels of kv head G in the rows of the chosen
// positions. rows_first: the position layer L's row 0 holds.
void zeroChannels(KvCache& cache, const AttentionQuery& query, int64_t kv_head, int64_t rows_first,
                  const CacheEdit& edit) {
  std::vector<int64_t> positions = edit.zero_positions;
  if (positions.empty()) {
    for (int64_t p = 0; p < query.position; ++p) positions.push_back(p);
  }
  auto keys = cache.keys(query.layer)[kv_head];      // [rows, D], a view of the cache
  auto values = cache.values(query.layer)[kv_head];  // [rows, D]
  const auto k_channels = torch::tensor(edit.zero_key_channels, torch::kInt64);
  const auto v_channels = torch::tensor(edit.zero_value_channels, torch::kInt64);
  for (int64_t p : positions) {
    if (p < rows_first) continue;  // left the window: nothing to zero
    if (k_channels.numel() > 0) keys[p - rows_first].index_fill_(0, k_channels, 0.0);
    if (v_channels.numel() > 0) values[p - rows_first].index_fill_(0, v_channels, 0.0);
  }
}

// Edits layer L of a cache holding positions 0..P-1 and returns the
// position each of its remaining rows holds, in row order.
std::vector<int64_t> applyEdit(KvCache& cache, const ModelConfig& config, const AttentionQuery& query,
                               int64_t kv_head, const CacheEdit& edit) {
  const int64_t layer = query.layer, P = query.position;
  // A sliding window's mask counts rows, not positions: drop the rows that
  // left the window first, or a removed row would let an older one back in.
  const int64_t window = config.windowOf(layer);
  const int64_t first = window > 0 ? std::max<int64_t>(0, P - window + 1) : 0;
  cache.evictBefore(layer, first);
  zeroChannels(cache, query, kv_head, first, edit);

  const std::set<int64_t> removed(edit.remove_positions.begin(), edit.remove_positions.end());
  std::vector<int64_t> kept_rows, kept_positions;
  for (int64_t p = first; p < P; ++p) {
    if (removed.count(p) > 0) continue;
    kept_rows.push_back(p - first);
    kept_positions.push_back(p);
  }
  const auto index = torch::tensor(kept_rows, torch::kInt64);
  const auto k = cache.keys(layer).index_select(1, index);    // [kv_heads, kept, D]
  const auto v = cache.values(layer).index_select(1, index);  // [kv_heads, kept, D]
  cache.cropLayer(layer, 0);
  cache.append(layer, k, v);
  return kept_positions;
}

// Spreads one query's per-row weights ([rows]) over positions 0..P.
at::Tensor weightsByPosition(const at::Tensor& row_weights, std::vector<int64_t> row_positions, int64_t P) {
  row_positions.push_back(P);  // the query's own row comes last
  auto by_position = torch::zeros({P + 1}, row_weights.options());
  by_position.index_copy_(0, torch::tensor(row_positions, torch::kInt64).to(row_weights.device()), row_weights);
  return by_position;  // [P + 1]
}

void compareDistributions(WhatIf& result) {
  const auto log_before = torch::log_softmax(result.logits_before.to(torch::kFloat64), 0);  // [vocab]
  const auto log_after = torch::log_softmax(result.logits_after.to(torch::kFloat64), 0);    // [vocab]
  result.probabilities_before = log_before.exp().to(torch::kFloat32);
  result.probabilities_after = log_after.exp().to(torch::kFloat32);
  result.kl = klDivergence(log_before, log_after);
  result.top1_before = result.logits_before.argmax().item<int64_t>();
  result.top1_after = result.logits_after.argmax().item<int64_t>();
  result.max_logit_difference = (result.logits_after - result.logits_before).abs().max().item<double>();
}

}  // namespace

void checkCacheEdit(const ModelConfig& config, const AttentionQuery& query, const CacheEdit& edit) {
  checkPositions(edit.remove_positions, query.position, "remove row");
  checkPositions(edit.zero_positions, query.position, "zero channels of row");
  checkChannels(edit.zero_key_channels, config.head_dim, "K");
  checkChannels(edit.zero_value_channels, config.head_dim, "V");
}

WhatIf whatIf(const CausalLM& model, const std::vector<int64_t>& ids, const AttentionQuery& query,
              const CacheEdit& edit) {
  const ModelConfig& config = model.config();
  const auto tokens = static_cast<int64_t>(ids.size());
  checkAttentionQuery(config, tokens, query);
  checkCacheEdit(config, query, edit);
  checkRotaryAgrees(config, tokens, query.position);
  c10::InferenceMode guard;
  const int64_t P = query.position, H = query.head;

  auto cache = model.makeCache();
  if (P > 0) model.forward(torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + P), torch::kInt64), 0, cache.get(), nullptr, 0);
  auto edited = copyOf(model, *cache);
  WhatIf result;
  result.query = query;
  result.kv_head = kvHeadOf(config, H);
  const auto row_positions = applyEdit(*edited, config, query, result.kv_head, edit);

  const auto token = torch::tensor(std::vector<int64_t>{ids[P]}, torch::kInt64);
  ProbeRecorder before(query.layer, {Probe::AttentionWeights, Probe::AttentionOutput});
  ProbeRecorder after(query.layer, {Probe::AttentionWeights, Probe::AttentionOutput});
  result.logits_before = model.forward(token, P, cache.get(), &before)[0].to(torch::kFloat32);  // [vocab]
  // Layer L now holds fewer rows than position P implies: that is the point.
  result.logits_after = model.forwardUnchecked(token, P, edited.get(), &after)[0].to(torch::kFloat32);

  result.weights_before = before.get(Probe::AttentionWeights, query.layer)[H][0];  // [P + 1]: every row present
  result.weights_after = weightsByPosition(after.get(Probe::AttentionWeights, query.layer)[H][0], row_positions, P);
  result.output_before = before.get(Probe::AttentionOutput, query.layer)[H][0];  // [D]
  result.output_after = after.get(Probe::AttentionOutput, query.layer)[H][0];
  result.removed = torch::zeros({P + 1}, torch::kBool);
  for (int64_t p : edit.remove_positions) result.removed[p] = true;
  compareDistributions(result);
  return result;
}

ElementScores elementScores(const AttentionSteps& steps) {
  ElementScores scores;
  scores.keys = steps.keys.abs() * steps.q.abs().unsqueeze(0);          // [P + 1, D]
  scores.values = steps.values.abs() * steps.weights.unsqueeze(1);      // [P + 1, D]
  return scores;
}

}  // namespace kvscope
