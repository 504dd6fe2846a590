#include "core/compress/compression_lab.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <torch/types.h>

#include "core/cache/row_demotion.h"
#include "core/cache/tracked_cache.h"
#include "core/decode/autoregressive.h"
#include "core/error.h"
#include "core/model/probe_recorder.h"
#include "core/model/scoring.h"

namespace kvscope {

namespace {

void checkInput(const CausalLM& model, const CompressionInput& input, const CompressionSpec& spec) {
  spec.validate();
  require(input.prompt.size() >= 2, "compress: the prompt needs at least 2 tokens (the prefill is compressed, "
                                    "then the last prompt token is the first step), got " +
                                        std::to_string(input.prompt.size()));
  require(input.max_new >= 0, "--max-new must be >= 0, got " + std::to_string(input.max_new));
  const int64_t fed = input.continuation.empty() ? input.max_new : static_cast<int64_t>(input.continuation.size());
  checkFitsContext(model, static_cast<int64_t>(input.prompt.size()), fed);
}

// K and V bytes of every layer: every row, and the entries kept.
std::pair<int64_t, int64_t> cacheBytes(const KvCache& cache, const PrefillCompression& done, int64_t demote_bits) {
  const PrunedElements& pruned = done.pruned;
  const int64_t element = static_cast<int64_t>(c10::elementSize(cache.storageDtype()));
  int64_t full = 0, kept = 0;
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    const int64_t rows = cache.length(l), kv = cache.kvHeads(), D = cache.headDim();
    full += 2 * kv * rows * D * element;
    auto row_keep = cache.keepMask(l);  // [kv, T]
    if (!row_keep.defined()) row_keep = torch::ones({kv, rows}, torch::kBool);
    if (!done.demoted.empty()) {
      // Demoted rows are counted at their own width, not as full rows.
      const auto demoted = done.demoted[l];  // [kv, T]
      kept += 2 * demotedRowBytes(demoted.sum().item<int64_t>(), D, demote_bits);
      row_keep = row_keep & demoted.logical_not();
    }
    auto k_keep = pruned.k_keep.empty() ? torch::ones({kv, rows, D}, torch::kBool) : pruned.k_keep[l];  // [kv, T, D]
    auto v_keep = pruned.v_keep.empty() ? torch::ones({kv, rows, D}, torch::kBool) : pruned.v_keep[l];  // [kv, T, D]
    kept += element * ((k_keep & row_keep.unsqueeze(2)).sum().item<int64_t>() +
                       (v_keep & row_keep.unsqueeze(2)).sum().item<int64_t>());
  }
  return {full, kept};
}

// [layer][kv head] the positions attention still reads, in order.
std::vector<std::vector<std::vector<int64_t>>> keptPositions(const KvCache& cache) {
  std::vector<std::vector<std::vector<int64_t>>> kept(static_cast<size_t>(cache.numLayers()));
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    const int64_t rows = cache.length(l);
    auto mask = cache.keepMask(l);  // [kv, T]
    if (!mask.defined()) mask = torch::ones({cache.kvHeads(), rows}, torch::kBool);
    const auto held = mask.contiguous();  // [kv, T]
    for (int64_t h = 0; h < cache.kvHeads(); ++h) {
      const bool* row_kept = held.data_ptr<bool>() + h * rows;  // one read per row, not one item() call
      std::vector<int64_t> positions;
      for (int64_t r = 0; r < rows; ++r) {
        if (row_kept[r]) positions.push_back(cache.firstPosition(l) + r);
      }
      kept[l].push_back(std::move(positions));
    }
  }
  return kept;
}

// The full cache's attention mass on the rows the compressed cache holds,
// averaged over layers and query heads. weights: per layer [heads, 1, T].
double keptAttentionMass(const KvCache& compressed, const std::vector<at::Tensor>& weights) {
  double total = 0;
  for (int64_t l = 0; l < compressed.numLayers(); ++l) {
    const auto keep = compressed.keepMask(l);  // [kv, T]
    if (!keep.defined()) {
      total += 1;
      continue;
    }
    const int64_t group = weights[l].size(0) / compressed.kvHeads();
    auto per_head_keep = keep.repeat_interleave(group, 0).to(torch::kFloat32);  // [heads, T]
    total += (weights[l].select(1, 0) * per_head_keep).sum(-1).mean().item<double>();
  }
  return total / static_cast<double>(compressed.numLayers());
}

// |o_comp - o_full| / |o_full| per layer and head; outputs per layer [heads, 1, D].
at::Tensor outputError(const std::vector<at::Tensor>& full, const std::vector<at::Tensor>& compressed) {
  std::vector<at::Tensor> per_layer;
  for (size_t l = 0; l < full.size(); ++l) {
    auto difference = (compressed[l] - full[l]).flatten(1).norm(2, {1});            // [heads]
    per_layer.push_back(difference / full[l].flatten(1).norm(2, {1}).clamp_min(1e-12));  // [heads]
  }
  return torch::stack(per_layer);  // [layers, heads]
}

void summarise(CompressionResult& result, double nll_full, double nll_compressed, int64_t scored) {
  const auto& steps = result.steps;
  if (!steps.empty()) {
    double kl = 0, mass = 0;
    int64_t agree = 0;
    for (const CompressionStep& s : steps) {
      kl += s.kl;
      mass += s.attention_mass;
      agree += s.top1_full == s.top1_compressed ? 1 : 0;
      result.kl_max = std::max(result.kl_max, s.kl);
    }
    const double count = static_cast<double>(steps.size());
    result.kl_mean = kl / count;
    result.attention_mass = mass / count;
    result.top1_agreement = static_cast<double>(agree) / count;
    result.output_error = result.output_error / count;
  }
  if (scored > 0) {
    result.perplexity_full = std::exp(nll_full / static_cast<double>(scored));
    result.perplexity_compressed = std::exp(nll_compressed / static_cast<double>(scored));
  }
}

// The compressed cache's K and V and the pruning masks, copied before the
// decode steps append to (and TOVA evicts from) the cache.
void recordCache(CompressionResult& result, const PrefillCompression& done, const KvCache& compressed) {
  for (int64_t l = 0; l < compressed.numLayers(); ++l) {
    result.keys.push_back(compressed.keys(l).to(torch::kFloat32).clone());      // [kv, T, D]
    result.values.push_back(compressed.values(l).to(torch::kFloat32).clone());  // [kv, T, D]
  }
  result.k_keep = done.pruned.k_keep;
  result.v_keep = done.pruned.v_keep;
}

// What the prefill compression did, into the result: budgets, removals,
// scores, the positions kept and the bytes.
void recordCompression(CompressionResult& result, const PrefillCompression& done, const KvCache& compressed,
                       const CompressionSpec& spec) {
  result.layer_budgets = done.layer_budgets;
  result.removed = done.removed;
  result.scores = done.scores;
  result.pruned_k = done.pruned.k;
  result.pruned_v = done.pruned.v;
  result.kept = keptPositions(compressed);
  result.demote_max_error = done.demote_max_error;
  for (const at::Tensor& demoted : done.demoted) result.demoted += demoted.sum().item<int64_t>();
  const int64_t demote_bits = spec.eviction ? spec.eviction->demote_bits : 0;
  std::tie(result.bytes_full, result.bytes_kept) = cacheBytes(compressed, done, demote_bits);
}

std::vector<int64_t> slidingWindows(const ModelConfig& config) {
  std::vector<int64_t> windows;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) windows.push_back(config.windowOf(layer));
  return windows;
}

// The two caches of the lab, tracked as a self-speculating session tracks
// its own: the compressed cache is the drafting copy's (CacheRole::Drafter),
// the full one the target's, sharing one ledger and one event log. The
// prefill is round 0; step i is round i + 1, in which the compressed cache
// is fed at its Draft phase, the full one at Verify, and a policy that
// evicts per step (tova) evicts at Prune. Plus the running sums the summary needs.
struct ShadowedCaches {
  explicit ShadowedCaches(const CausalLM& model)
      : full(CacheRole::Target, model.makeCache(), slidingWindows(model.config()), faults, ledger, events),
        compressed(CacheRole::Drafter, model.makeCache(), slidingWindows(model.config()), faults, ledger, events) {}

  FaultPolicy faults;  // none: the lab measures a correct cache
  KvLedger ledger;
  CacheEventLog events;
  TrackedCache full;
  TrackedCache compressed;
  std::vector<int64_t> held;  // the tokens both caches hold
  double nll_full = 0;
  double nll_compressed = 0;
  int64_t scored = 0;  // steps with a known next token
};

// Feeds stream[i] at step i to both caches and compares them; a greedy run
// appends the full cache's top-1 to the stream. A policy that evicts per
// step (tova) then evicts from the compressed cache by this step's own attention.
CompressionStep compareStep(const CausalLM& model, ShadowedCaches& caches, std::vector<int64_t>& stream, int64_t i,
                            bool greedy, const CompressionSpec& spec, CompressionResult& result) {
  const bool per_step = spec.eviction && evictsPerStep(spec.eviction->policy);
  const bool step_weights = per_step && needsAttention(spec.eviction->policy);
  const int64_t round = i + 1;
  CompressionStep step;
  step.position = result.prefill_rows + i;
  step.token = stream[i];
  caches.held.push_back(step.token);
  ProbeRecorder full_probes({Probe::AttentionWeights, Probe::AttentionOutput});
  ProbeRecorder compressed_probes(step_weights ? std::vector<Probe>{Probe::AttentionWeights, Probe::AttentionOutput}
                                               : std::vector<Probe>{Probe::AttentionOutput});
  const auto q_logits =
      caches.compressed.forward(model, Phase::Draft, caches.held, round, &compressed_probes, 1)[0];      // [vocab]
  const auto p_logits = caches.full.forward(model, Phase::Verify, caches.held, round, &full_probes, 1)[0];  // [vocab]
  const auto log_p = torch::log_softmax(p_logits.to(torch::kFloat64), -1);  // [vocab]
  const auto log_q = torch::log_softmax(q_logits.to(torch::kFloat64), -1);  // [vocab]
  step.kl = klDivergence(log_p, log_q);
  step.top1_full = log_p.argmax().item<int64_t>();
  step.top1_compressed = log_q.argmax().item<int64_t>();
  step.attention_mass = keptAttentionMass(caches.compressed.storage(), full_probes.perLayer(Probe::AttentionWeights));
  result.output_error += outputError(full_probes.perLayer(Probe::AttentionOutput),
                                     compressed_probes.perLayer(Probe::AttentionOutput));
  if (greedy) stream.push_back(step.top1_full);
  if (i + 1 < static_cast<int64_t>(stream.size())) {
    step.next = stream[i + 1];
    caches.nll_full -= log_p[step.next].item<double>();
    caches.nll_compressed -= log_q[step.next].item<double>();
    ++caches.scored;
  }
  if (per_step) {
    // The policy decides from the compressed cache; the cache takes the decision and logs it.
    const EvictionDecision decision = decideDecodeStep(
        caches.compressed.storage(), *spec.eviction, compressed_probes.perLayer(Probe::AttentionWeights), i);
    const auto removed =
        caches.compressed.evict({round, Phase::Prune}, evictionPolicyName(spec.eviction->policy), decision);
    result.removed.insert(result.removed.end(), removed.begin(), removed.end());
  }
  return step;
}

// Prefills both caches with `prefill` (round 0) and compresses one as `spec`
// says, scoring with what its prefill forward recorded.
PrefillCompression prefillBoth(const CausalLM& model, ShadowedCaches& caches, std::vector<int64_t> prefill,
                              const CompressionSpec& spec) {
  caches.held = std::move(prefill);
  caches.full.forward(model, Phase::Prefill, caches.held, 0, nullptr, 0);
  ProbeRecorder evidence(compressionEvidence(spec));
  caches.compressed.forward(model, Phase::Prefill, caches.held, 0, &evidence, 0);
  if (!spec.eviction && !spec.pruning) return {};
  return caches.compressed.compress({0, Phase::Prefill}, compressionEventName(spec), compressionRequest(spec, evidence));
}

}  // namespace

CompressionResult runCompressionLab(const CausalLM& model, const CompressionInput& input,
                                    const CompressionSpec& spec) {
  checkInput(model, input, spec);
  checkCompressible(model.config(), spec);
  c10::InferenceMode guard;
  CompressionResult result;
  result.prefill_rows = static_cast<int64_t>(input.prompt.size()) - 1;

  // Prefill both caches with the prompt minus its last token; compress one.
  ShadowedCaches caches(model);
  const PrefillCompression done = prefillBoth(model, caches, {input.prompt.begin(), input.prompt.end() - 1}, spec);
  recordCompression(result, done, caches.compressed.storage(), spec);
  if (input.record_cache) recordCache(result, done, caches.compressed.storage());

  // The tokens both caches are fed: the last prompt token, then the continuation or greedy tokens.
  std::vector<int64_t> stream{input.prompt.back()};
  stream.insert(stream.end(), input.continuation.begin(), input.continuation.end());
  const bool greedy = input.continuation.empty();
  const int64_t steps = greedy ? input.max_new : static_cast<int64_t>(stream.size());
  const ModelConfig& config = model.config();
  result.output_error = torch::zeros({config.num_layers, config.num_heads}, torch::kFloat32);  // [layers, heads]
  for (int64_t i = 0; i < steps; ++i) {
    result.steps.push_back(compareStep(model, caches, stream, i, greedy, spec, result));
  }
  summarise(result, caches.nll_full, caches.nll_compressed, caches.scored);
  result.events = std::move(caches.events);
  return result;
}

}  // namespace kvscope
