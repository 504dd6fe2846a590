#include "core/decode/session.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/decode/autoregressive.h"
#include "core/decode/speculative_acceptance.h"
#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxTraceBudgetMb = int64_t{1} << 30;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Collects the attention weights of every layer during one forward.
// Collects the attention weights and masks of every layer during one forward.
class AttentionRecorder : public ProbeSink {
 public:
  explicit AttentionRecorder(int64_t layers) : weights(layers), masks(layers) {}
  bool wants(Probe probe, int64_t) const override {
    return probe == Probe::AttentionWeights || probe == Probe::AttentionMask;
  }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    (probe == Probe::AttentionWeights ? weights : masks)[layer] = value;
  }
  std::vector<at::Tensor> weights;  // per layer [heads, fed, keys]
  std::vector<at::Tensor> masks;    // per layer [fed, keys] bool
};

}  // namespace

void SessionOptions::validate() const {
  require(gamma >= 0, "gamma must be >= 0, got " + std::to_string(gamma));
  require(gamma_min >= 1 && gamma_max >= gamma_min, "adaptive gamma bounds must satisfy 1 <= min <= max");
  require(!adaptive_gamma || (gamma >= gamma_min && gamma <= gamma_max),
          "the starting gamma must lie within the adaptive bounds");
  require(max_new_tokens >= 1, "max new tokens must be >= 1, got " + std::to_string(max_new_tokens));
  require(trace_budget_mb >= 0 && trace_budget_mb <= kMaxTraceBudgetMb,
          "the trace budget must be 0 (no limit) or a positive number of MB, got " + std::to_string(trace_budget_mb));
  sampling.validate();
  if (eviction) {
    require(use_cache, "--evict needs the KV cache on (--cache on): it removes rows from the target's cache");
    eviction->validate();
  }
}

Session::Session(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
                 std::vector<int64_t> prompt, SessionOptions options, std::vector<int64_t> eos_ids)
    : target_(std::move(target)),
      drafter_(std::move(drafter)),
      options_(std::move(options)),
      faults_(options_.fault),
      eos_ids_(std::move(eos_ids)),
      generator_(makeGenerator(options_.seed)),
      // Clamped so that an invalid value (refused just below) cannot overflow.
      record_budget_(std::clamp<int64_t>(options_.trace_budget_mb, 0, kMaxTraceBudgetMb) * 1024 * 1024) {
  require(target_ != nullptr, "session: no target model");
  options_.validate();
  record_.sequence = std::move(prompt);
  record_.bookkeeping = options_.bookkeeping;
  record_.fault = faultInfo(options_.fault).name;
  record_.use_cache = options_.use_cache;
  record_.target_layers = target_->config().num_layers;
  checkFitsContext(*target_, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
  if (options_.use_cache) checkCacheStaysValid(*target_, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
  const int64_t vocab = target_->config().vocab_size;
  for (int64_t id : record_.sequence) {
    require(id >= 0 && id < vocab, "prompt token id " + std::to_string(id) + " is outside the target's vocabulary (size " +
                                       std::to_string(vocab) + ")");
  }
  if (const CausalLM* draft_model = drafter_ ? drafter_->model() : nullptr) {
    const int64_t drafter_vocab = draft_model->config().vocab_size;
    if (drafter_vocab != vocab) {
      throw Error("the drafter's vocabulary (" + std::to_string(drafter_vocab) + " ids) does not match the target's (" +
                  std::to_string(vocab) + " ids); speculative decoding needs one shared vocabulary");
    }
    checkFitsContext(*draft_model, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
    if (options_.use_cache) checkCacheStaysValid(*draft_model, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
    record_.drafter_layers = draft_model->config().num_layers;
    if (options_.use_cache) drafter_cache_ = draft_model->makeCache(cacheStorage());
    layout_[slot(CacheRole::Drafter)].layers.resize(static_cast<size_t>(record_.drafter_layers));
  }
  if (options_.use_cache) target_cache_ = target_->makeCache(cacheStorage());
  if (needsSlidingWindow(options_.fault) && target_->config().sliding_window <= 0) {
    throw Error(std::string("fault ") + faultInfo(options_.fault).name +
                " acts on sliding-window layers, and the target has none (no sliding_window in its config.json)");
  }
  if (options_.eviction) {
    for (int64_t l = 0; l < target_->config().num_layers; ++l) {
      require(target_->config().windowOf(l) <= 0,
              "--evict: token eviction on a model with sliding-window layers (layer " + std::to_string(l) +
                  ") is not supported yet: their cache already drops rows from the front");
    }
  }
  layout_[slot(CacheRole::Target)].layers.resize(static_cast<size_t>(record_.target_layers));
  record_.prompt_length = static_cast<int64_t>(record_.sequence.size());
  record_.origins.assign(record_.sequence.size(), TokenOrigin::Prompt);
  gamma_ = drafter_ ? options_.gamma : 0;
}

Session::~Session() = default;

c10::optional<c10::ScalarType> Session::cacheStorage() const {
  if (faults_.halfPrecisionStorage()) return torch::kFloat16;
  return c10::nullopt;  // the compute dtype
}

std::vector<int64_t> Session::generated() const {
  return std::vector<int64_t>(record_.sequence.begin() + record_.prompt_length, record_.sequence.end());
}

Metrics Session::metrics() const { return computeMetrics(record_.rounds); }

KvCache* Session::cacheOf(CacheRole role) const {
  return role == CacheRole::Target ? target_cache_.get() : drafter_cache_.get();
}

std::vector<int64_t>& Session::believed(CacheRole role) {
  return role == CacheRole::Target ? believed_target_ : believed_drafter_;
}

const std::vector<int64_t>& Session::believedCacheTokens(CacheRole role) const {
  return role == CacheRole::Target ? believed_target_ : believed_drafter_;
}

namespace {

// Passes probes through to the caller's sink and keeps every layer's K and V
// as computed, to compare with what the cache stored.
class WriteRecorder : public ProbeSink {
 public:
  WriteRecorder(int64_t layers, ProbeSink* inner) : keys(layers), values(layers), inner_(inner) {}
  bool wants(Probe probe, int64_t layer) const override {
    return probe == Probe::Key || probe == Probe::Value || (inner_ && inner_->wants(probe, layer));
  }
  void record(Probe probe, int64_t layer, const at::Tensor& value) override {
    if (probe == Probe::Key) keys[layer] = value;
    if (probe == Probe::Value) values[layer] = value;
    if (inner_ && inner_->wants(probe, layer)) inner_->record(probe, layer, value);
  }
  std::vector<at::Tensor> keys, values;  // per layer [kv_heads, n, head_dim], compute dtype

 private:
  ProbeSink* inner_;
};

// Row i's probability of token picks[i]: distributions [k, vocab] -> k values.
std::vector<double> probabilitiesOfPicks(const at::Tensor& distributions, const std::vector<int64_t>& picks) {
  const auto k = static_cast<int64_t>(picks.size());
  if (k == 0) return {};
  const auto picked = distributions.gather(1, torch::tensor(picks, torch::kInt64).unsqueeze(1))  // [k, 1]
                          .squeeze(1)
                          .to(torch::kFloat64)
                          .contiguous();  // [k]
  return {picked.data_ptr<double>(), picked.data_ptr<double>() + k};
}

// The largest difference between what the cache stored (per layer
// [kv_heads, m, head_dim]) and what the forward computed, put in write order.
double storeError(const std::vector<at::Tensor>& stored_k, const std::vector<at::Tensor>& stored_v,
                  const std::vector<at::Tensor>& computed_k, const std::vector<at::Tensor>& computed_v,
                  const std::vector<int64_t>& order) {
  const auto index = torch::tensor(order, torch::kInt64);
  std::vector<at::Tensor> errors;  // per layer and K/V, a 0-d tensor: one read at the end
  for (size_t layer = 0; layer < stored_k.size(); ++layer) {
    const auto wanted_k = computed_k[layer].index_select(1, index).to(torch::kFloat32);
    const auto wanted_v = computed_v[layer].index_select(1, index).to(torch::kFloat32);
    errors.push_back((stored_k[layer].to(torch::kFloat32) - wanted_k).abs().max());
    errors.push_back((stored_v[layer].to(torch::kFloat32) - wanted_v).abs().max());
  }
  return torch::stack(errors).max().item<double>();
}

}  // namespace

std::vector<int64_t> Session::rowsPerLayer(CacheRole role) const {
  const KvCache* cache = cacheOf(role);
  std::vector<int64_t> rows;
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) rows.push_back(cache->length(layer));
  return rows;
}

void Session::logEvent(CacheEvent event) {
  std::vector<int64_t>& first = contract_first_[slot(event.cache)];
  if (event.expected_first.empty() && std::any_of(first.begin(), first.end(), [](int64_t p) { return p > 0; })) {
    event.expected_first = first;
  }
  first = event.expected_first;
  applyEvent(layout_[slot(event.cache)], event);
  if (event.cache == CacheRole::Target) target_masks_.apply(event, static_cast<int64_t>(record_.events.events().size()));
  contract_rows_[slot(event.cache)] = event.expected_rows;
  record_.events.record(std::move(event));
}

void Session::slideWindows(CacheRole role) {
  KvCache* cache = cacheOf(role);
  if (cache == nullptr) return;
  const ModelConfig& config = role == CacheRole::Target ? target_->config() : drafter_->model()->config();
  const int64_t next_position = static_cast<int64_t>(believed(role).size());
  std::vector<int64_t> first = contract_first_[slot(role)];
  first.resize(static_cast<size_t>(cache->numLayers()), 0);
  // Layers that lose the same front rows share one event; the contract moves
  // by the true window whatever the fault does.
  std::map<std::vector<int64_t>, std::vector<int64_t>> layers_by_removed;
  std::string fault_action;
  const CacheLayout& layout = layout_[slot(role)];
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
    const int64_t window = config.windowOf(layer);
    if (window <= 0) continue;
    first[static_cast<size_t>(layer)] = std::max<int64_t>(0, next_position - (window - 1));
    const WindowPlan plan = faults_.window(role, window);
    const int64_t count = std::clamp<int64_t>(next_position - plan.keep_before_query - cache->firstPosition(layer), 0,
                                              cache->length(layer));
    if (count == 0) continue;
    const auto& rows = layout.layers[static_cast<size_t>(layer)];
    const std::vector<int64_t> removed(rows.begin(), rows.begin() + std::min<int64_t>(count, rows.size()));
    layers_by_removed[removed].push_back(layer);
    if (!plan.fault_action.empty()) fault_action = plan.fault_action;
  }
  if (layers_by_removed.empty()) {
    // Nothing physically left the window (e.g. the cache was just cleared);
    // the contract still moves, and the next logged event carries it.
    if (std::any_of(first.begin(), first.end(), [](int64_t p) { return p > 0; })) contract_first_[slot(role)] = first;
    return;
  }
  for (const auto& [removed, layers] : layers_by_removed) {
    CacheEvent event;
    event.cache = role;
    event.round = round_index_;
    event.phase = round_index_ == 0 ? Phase::Prefill : Phase::Prune;
    event.kind = CacheEventKind::Evict;
    event.reason = DeathReason::Eviction;
    event.expected_rows = contract_rows_[slot(role)];
    event.expected_first = first;
    event.layers = layers.size() == static_cast<size_t>(cache->numLayers()) ? std::vector<int64_t>() : layers;
    event.fault_action = fault_action;
    event.rows_before = rowsPerLayer(role);
    for (int64_t layer : layers) cache->evictFront(layer, static_cast<int64_t>(removed.size()));
    event.rows_after = rowsPerLayer(role);
    event.removed = removed;
    // Entries no layer holds any more die now (Gemma 2's global layers keep theirs).
    CacheLayout after = layout_[slot(role)];
    applyEvent(after, event);
    for (int64_t entry : removed) {
      const bool held = std::any_of(after.layers.begin(), after.layers.end(), [&](const std::vector<int64_t>& r) {
        return std::find(r.begin(), r.end(), entry) != r.end();
      });
      if (!held) record_.ledger.recordDeath(entry, round_index_, event.phase, DeathReason::Eviction);
    }
    logEvent(std::move(event));
  }
}

at::Tensor Session::feed(CacheRole role, const std::vector<int64_t>& tokens, Phase phase, ProbeSink* probes,
                         int64_t logit_rows) {
  const CausalLM& model = role == CacheRole::Target ? *target_ : *drafter_->model();
  KvCache* cache = cacheOf(role);
  RoundRecord& record = record_.rounds.back();
  (role == CacheRole::Target ? record.target_forwards : record.drafter_forwards) += 1;
  if (cache == nullptr) return model.forward(idsTensor(tokens), 0, nullptr, probes, logit_rows);  // [rows, vocab]

  // Feed only the tokens the cache does not hold yet, at explicit positions.
  std::vector<int64_t>& held = believed(role);
  const int64_t believed_length = static_cast<int64_t>(held.size());
  const int64_t start = faults_.feedStart(role, phase, believed_length);
  const int64_t rope_start = start + (start == believed_length ? position_shift(role) : 0);
  const std::vector<int64_t> pending(tokens.begin() + start, tokens.end());
  const int64_t n = static_cast<int64_t>(pending.size());
  const std::vector<int64_t> rows_before = rowsPerLayer(role);

  WriteRequest request{role, phase, n, rows_before.front(), -1};
  const int64_t bonus = bonus_position_[slot(role)];
  if (bonus >= start && bonus < start + n) request.bonus_index = bonus - start;
  WritePlan plan = faults_.write(request);
  std::string fault_action = plan.fault_action;
  if (start != believed_length) fault_action = "fed the whole prefix again from position 0 on top of the cache";
  if (rope_start != start) {
    fault_action = "rotary positions start at " + std::to_string(rope_start) + " instead of " + std::to_string(start) +
                   " (the position counter was not rewound after a rollback)";
  }
  if (faults_.halfPrecisionStorage()) fault_action = "stored K/V in float16";
  cache->setWriteOrder(plan.order);
  cache->setCausalAmongNewRows(plan.causal_among_new);
  WriteRecorder computed(cache->numLayers(), probes);
  const auto ids = idsTensor(pending);
  at::Tensor logits;
  try {
    logits = faults_.active() ? model.forwardUnchecked(ids, rope_start, cache, &computed, logit_rows)  // [rows, vocab]
                              : model.forward(ids, rope_start, cache, &computed, logit_rows);  // invariant asserted
  } catch (...) {
    cache->setWriteOrder(std::nullopt);
    cache->setCausalAmongNewRows(true);
    throw;
  }
  cache->setWriteOrder(std::nullopt);
  cache->setCausalAmongNewRows(true);

  std::vector<int64_t> order = plan.order.value_or(std::vector<int64_t>());
  if (!plan.order) {
    for (int64_t i = 0; i < n; ++i) order.push_back(i);
  }
  std::vector<RowIdentity> identities;
  for (int64_t i : order) identities.push_back({pending[i], start + i, rope_start + i});
  if (request.bonus_index >= 0) bonus_position_[slot(role)] = -1;  // fed (written or not)
  recordWrite(role, phase, identities, rows_before, computed.keys, computed.values, order,
              static_cast<int64_t>(tokens.size()), fault_action);
  held.resize(start);
  held.insert(held.end(), pending.begin(), pending.end());
  return logits;
}

void Session::recordWrite(CacheRole role, Phase phase, const std::vector<RowIdentity>& identities,
                          const std::vector<int64_t>& rows_before, const std::vector<at::Tensor>& computed_k,
                          const std::vector<at::Tensor>& computed_v, const std::vector<int64_t>& order,
                          int64_t expected_rows, std::string fault_action) {
  KvCache* cache = cacheOf(role);
  const int64_t m = static_cast<int64_t>(identities.size());
  CacheEvent event;
  event.cache = role;
  event.round = round_index_;
  event.phase = phase;
  event.rows_before = rows_before;
  event.rows_after = rowsPerLayer(role);
  event.expected_rows = expected_rows;
  event.fault_action = std::move(fault_action);
  if (m > 0) {
    std::vector<at::Tensor> k_rows, v_rows;
    for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
      k_rows.push_back(cache->keys(layer).narrow(1, rows_before[layer], m));  // [kv_heads, m, head_dim] as stored
      v_rows.push_back(cache->values(layer).narrow(1, rows_before[layer], m));
    }
    // Without an injected fault the cache stores a plain copy of what the
    // forward computed, in the same dtype and order: comparing them would
    // cost more than a small drafter's forward and could only find equality.
    if (faults_.active()) event.max_store_error = storeError(k_rows, v_rows, computed_k, computed_v, order);
    const int64_t first = record_.ledger.recordBirths(role, identities, k_rows, v_rows, round_index_, phase);
    for (int64_t i = 0; i < m; ++i) event.written.push_back(first + i);
  }
  int64_t& refeed = refeed_pending_[slot(role)];
  event.kind = refeed > 0 ? CacheEventKind::Refeed : CacheEventKind::Append;
  refeed = 0;
  logEvent(std::move(event));
}

void Session::pruneCache(CacheRole role, int64_t keep, int64_t first_wrong_position) {
  KvCache* cache = cacheOf(role);
  if (cache == nullptr) return;
  std::vector<int64_t>& held = believed(role);
  const int64_t contract_before = contract_rows_[slot(role)];
  const int64_t required = std::min(contract_before, keep);
  const PruneAction action = faults_.prune(
      {role, static_cast<int64_t>(held.size()), keep, record_.rounds.back().accepted, cache->numLayers()});
  const int64_t dropped = static_cast<int64_t>(held.size()) - action.believed_after;
  if (required == contract_before && action.crop_to < 0) return;  // nothing required, nothing done
  held.resize(static_cast<size_t>(action.believed_after));
  if (!faults_.rewindsPositions() && dropped > 0) position_shift(role) += dropped;

  CacheEvent event;
  event.cache = role;
  event.round = round_index_;
  event.phase = Phase::Prune;
  event.kind = action.kind;
  event.reason = action.reason;
  event.expected_rows = required;
  event.fault_action = action.fault_action;
  event.rows_before = rowsPerLayer(role);
  if (action.crop_to >= 0) {
    for (int64_t layer = 0; layer < action.layers_cropped; ++layer) {
      // crop_to counts positions; a sliding window's layer starts later.
      const int64_t rows = action.crop_to - cache->firstPosition(layer);
      cache->cropLayer(layer, std::clamp<int64_t>(rows, 0, cache->length(layer)));
    }
  }
  event.rows_after = rowsPerLayer(role);
  // Entries that no layer holds any more die now.
  const CacheLayout before = layout_[slot(role)];
  CacheLayout after = before;
  applyEvent(after, event);
  std::vector<bool> still_held(static_cast<size_t>(record_.ledger.size()), false);
  for (const auto& rows : after.layers) {
    for (int64_t entry : rows) still_held[static_cast<size_t>(entry)] = true;
  }
  std::vector<bool> seen(still_held.size(), false);
  int64_t refeed = 0;
  for (const auto& rows : before.layers) {
    for (int64_t entry : rows) {
      if (still_held[static_cast<size_t>(entry)] || seen[static_cast<size_t>(entry)]) continue;
      seen[static_cast<size_t>(entry)] = true;
      const LedgerEntry& e = record_.ledger.entry(entry);
      event.removed.push_back(entry);
      if (e.reason == DeathReason::Eviction) continue;  // no head read it since a policy masked it: died then
      DeathReason reason = action.reason;
      if (reason == DeathReason::RejectedDraft && e.position < first_wrong_position) {
        reason = DeathReason::Refeed;  // a correct entry cut on purpose (seed bookkeeping)
        ++refeed;
      }
      record_.ledger.recordDeath(entry, round_index_, Phase::Prune, reason);
    }
  }
  if (options_.bookkeeping == Bookkeeping::Seed) refeed_pending_[slot(role)] = refeed;
  logEvent(std::move(event));
}

bool Session::recompressDue(bool any_round) const {
  if (!options_.eviction || options_.eviction->recompress_every <= 0 || !target_cache_) return false;
  return any_round || round_index_ % options_.eviction->recompress_every == 0;
}

void Session::compressTarget() {
  KvCache* cache = target_cache_.get();
  EvictionSettings settings = options_.eviction->settings;
  const bool scored = needsAttention(settings.policy);
  const std::vector<int64_t> rows = rowsPerLayer(CacheRole::Target);
  const int64_t queries = evidence_.queries();
  const std::vector<at::Tensor> attention = scored ? evidence_.attention(rows) : std::vector<at::Tensor>();  // [heads, q, rows[l]]
  evidence_.clear();
  if (rows.empty() || rows.front() == 0 || (scored && attention.empty())) return;  // nothing to score or remove
  // snapkv's observation window: at most the queries seen since the last compression.
  if (settings.window > queries && (settings.policy == EvictionPolicy::SnapKV || settings.policy == EvictionPolicy::Pyramid)) {
    settings.window = queries;
  }
  const std::vector<int64_t> budgets = layerBudgets(settings, cache->numLayers(), rows.front());
  logPolicyEviction(evictByPolicy(*cache, settings, attention, budgets).removed);
}

void Session::logPolicyEviction(const std::vector<RemovedRow>& removed) {
  if (removed.empty()) return;  // within budget: nothing happened, nothing to log
  const KvCache* cache = target_cache_.get();
  const CacheLayout& layout = layout_[slot(CacheRole::Target)];
  CacheEvent event;
  event.cache = CacheRole::Target;
  event.round = round_index_;
  event.phase = round_index_ == 0 ? Phase::Prefill : Phase::Prune;
  event.kind = CacheEventKind::Evict;
  event.reason = DeathReason::Eviction;
  event.policy = evictionPolicyName(options_.eviction->settings.policy);
  event.expected_rows = contract_rows_[slot(CacheRole::Target)];
  event.rows_before = event.rows_after = rowsPerLayer(CacheRole::Target);
  std::set<int64_t> touched;
  for (const RemovedRow& r : removed) {
    // The layout mirrors the cache row for row: the entry the masked row holds.
    const auto& rows = layout.layers.at(static_cast<size_t>(r.layer));
    const int64_t row = r.position - cache->firstPosition(r.layer);
    if (row < 0 || row >= static_cast<int64_t>(rows.size())) continue;
    event.masked.push_back({rows[static_cast<size_t>(row)], r.layer, r.kv_head, r.score});
    touched.insert(rows[static_cast<size_t>(row)]);
  }
  // An entry no head of any layer holding it reads any more is gone for attention: it dies now.
  EvictionMasks after = target_masks_;
  after.apply(event, 0);
  for (int64_t entry : touched) {
    bool read = false;
    for (size_t l = 0; l < layout.layers.size() && !read; ++l) {
      const auto& rows = layout.layers[l];
      if (std::find(rows.begin(), rows.end(), entry) == rows.end()) continue;
      for (int64_t h = 0; h < cache->kvHeads() && !read; ++h) read = !after.masked(entry, static_cast<int64_t>(l), h);
    }
    if (read) continue;
    record_.ledger.recordDeath(entry, round_index_, event.phase, DeathReason::Eviction);
    event.removed.push_back(entry);
  }
  logEvent(std::move(event));
}

void Session::stepPhase() {
  if (finished_) return;
  c10::InferenceMode guard;
  switch (next_phase_) {
    case Phase::Prefill: runPrefill(); break;
    case Phase::Draft: runDraft(); break;
    case Phase::Verify: runVerify(); break;
    case Phase::Accept: runAccept(); break;
    case Phase::Prune: runPrune(); break;
  }
}

void Session::stepRound() {
  if (finished_) return;
  const int64_t round = round_index_;
  while (!finished_ && round_index_ == round) stepPhase();
}

void Session::runToEnd(const std::atomic<bool>* cancel) {
  while (!finished_ && !(cancel && cancel->load())) stepPhase();
}

void Session::runPrefill() {
  RoundRecord record;
  record.index = 0;
  record.start_length = record_.prompt_length;
  record_.rounds.push_back(record);
  // Every token but the last goes into the caches; the last is fed by the
  // first round (so each round starts with L - 1 entries for L tokens).
  const std::vector<int64_t> prefix(record_.sequence.begin(), record_.sequence.end() - 1);
  if (!prefix.empty() && options_.use_cache) {
    auto start = Clock::now();
    const bool scored = options_.eviction && needsAttention(options_.eviction->settings.policy);
    evidence_.listen(scored, nullptr, static_cast<int64_t>(prefix.size()));
    feed(CacheRole::Target, prefix, Phase::Prefill, scored ? &evidence_ : nullptr, /*logit_rows=*/0);  // the cache is what a prefill is for
    evidence_.listen(false, nullptr, 0);
    slideWindows(CacheRole::Target);
    if (options_.eviction) compressTarget();
    record_.rounds.back().verify_ms = millisecondsSince(start);
    if (drafter_cache_) {
      start = Clock::now();
      feed(CacheRole::Drafter, prefix, Phase::Prefill, nullptr, /*logit_rows=*/0);
      slideWindows(CacheRole::Drafter);
      record_.rounds.back().draft_ms = millisecondsSince(start);
    }
  }
  round_index_ = 1;
  next_phase_ = Phase::Draft;
}

void Session::runDraft() {
  RoundRecord record;
  record.index = round_index_;
  record.start_length = static_cast<int64_t>(record_.sequence.size());
  const int64_t remaining = options_.max_new_tokens - static_cast<int64_t>(generated().size());
  // Never draft the last token: the round's own next token fills it.
  record.gamma = std::max<int64_t>(0, std::min(gamma_, remaining - 1));
  // longrope picks its factor set per forward by the largest position, so a
  // verify pass reaching past original_max_position_embeddings before the
  // sequence does would score every query with the long factors, unlike
  // plain decoding. Draft only up to the switch until the sequence crosses it.
  const RopeScaling& rope = target_->config().rope_scaling;
  if (rope.type == RopeScaling::Type::LongRope && record.start_length <= rope.original_max_position_embeddings) {
    record.gamma = std::min(record.gamma, rope.original_max_position_embeddings - record.start_length);
  }
  record_.rounds.push_back(record);
  RoundRecord& r = record_.rounds.back();
  const auto start = Clock::now();
  const int64_t vocab = target_->config().vocab_size;
  std::vector<at::Tensor> q_rows;

  if (r.gamma > 0 && drafter_ && drafter_->model() == nullptr) {
    const auto& ngram = static_cast<const NgramDrafter&>(*drafter_);
    r.drafts = ngram.propose(record_.sequence, r.gamma);
    for (int64_t d : r.drafts) {
      q_rows.push_back(at::one_hot(torch::tensor(d), vocab).to(torch::kFloat32));
      r.q_draft.push_back(1.0);
    }
  } else if (r.gamma > 0 && drafter_) {
    std::vector<int64_t> tokens = record_.sequence;
    std::vector<at::Tensor> draft_rows;
    for (int64_t i = 0; i < r.gamma; ++i) {
      const auto logits = feed(CacheRole::Drafter, tokens, Phase::Draft, nullptr, 1)[-1].to(torch::kFloat32);  // [vocab]
      draft_rows.push_back(logits);
      int64_t d = 0;
      if (options_.sampling.greedy) {
        // Greedy acceptance compares tokens only: no processed distribution to
        // keep. The drafter's own probability of each pick is read once all
        // drafts are in, off the drafting loop.
        d = logits.argmax().item<int64_t>();
      } else {
        const auto q = processedProbs(logits, options_.sampling);  // [vocab]
        d = sampleFrom(q, generator_);
        q_rows.push_back(q);
        r.q_draft.push_back(q[d].item<double>());
      }
      r.drafts.push_back(d);
      tokens.push_back(d);
      // Like HF, stop drafting once the drafter proposes an end of sequence.
      if (!options_.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), d) != eos_ids_.end()) break;
    }
    draft_logits_[r.index] = torch::stack(draft_rows);  // [drafts, vocab]
    if (options_.sampling.greedy) r.q_draft = probabilitiesOfPicks(draft_logits_[r.index].softmax(1), r.drafts);
  }
  draft_q_ = q_rows.empty() ? at::Tensor() : torch::stack(q_rows);  // [drafts, vocab]
  r.draft_ms = millisecondsSince(start);
  next_phase_ = Phase::Verify;
}

void Session::runVerify() {
  RoundRecord& r = record_.rounds.back();
  const auto start = Clock::now();
  std::vector<int64_t> tokens = record_.sequence;
  tokens.insert(tokens.end(), r.drafts.begin(), r.drafts.end());
  const int64_t queries = static_cast<int64_t>(r.drafts.size()) + 1;  // p_1 .. p_{k+1}
  AttentionRecorder attention(target_->config().num_layers);
  ProbeSink* views = options_.record_attention ? &attention : nullptr;
  // A later re-compression scores with these queries' attention too.
  const bool scored = recompressDue(/*any_round=*/true) && needsAttention(options_.eviction->settings.policy);
  evidence_.listen(scored, views, static_cast<int64_t>(tokens.size()));
  const auto logits = feed(CacheRole::Target, tokens, Phase::Verify, scored ? &evidence_ : views, queries);
  evidence_.listen(false, nullptr, 0);
  verify_logits_ = logits.narrow(0, logits.size(0) - queries, queries).to(torch::kFloat32);  // [k + 1, vocab]
  // Greedy acceptance reads the logits' argmax itself: a one-hot distribution
  // built from it would only repeat it.
  verify_p_ = options_.sampling.greedy ? at::Tensor()
                                       : processedProbRows(verify_logits_, options_.sampling);  // [k + 1, vocab]
  // What the target gave each draft (greedy: its softmax), all rows at once.
  const auto k = static_cast<int64_t>(r.drafts.size());
  if (k > 0) {
    const auto dists = options_.sampling.greedy ? verify_logits_.narrow(0, 0, k).softmax(1) : verify_p_.narrow(0, 0, k);
    r.p_draft = probabilitiesOfPicks(dists, r.drafts);
  }

  VerifyRecord verify;
  verify.first_query_position = r.start_length - 1;
  if (options_.record_logits) verify.logits = verify_logits_.clone();
  if (options_.record_attention) {
    for (const auto& w : attention.weights) {  // [heads, fed, keys] -> the verified query rows
      verify.attention.push_back(w.narrow(1, w.size(1) - queries, queries).to(torch::kFloat32).clone());
    }
    for (const auto& m : attention.masks) {  // [fed, keys] -> the verified query rows
      if (m.defined()) verify.masks.push_back(m.narrow(0, m.size(0) - queries, queries).clone());
    }
  }
  record_.verify[r.index] = std::move(verify);
  record_budget_.admit(record_.verify, r.index);
  r.verify_ms = millisecondsSince(start);
  next_phase_ = Phase::Accept;
}

void Session::runAccept() {
  RoundRecord& r = record_.rounds.back();
  const auto start = Clock::now();
  const AcceptanceResult result = options_.sampling.greedy
                                      ? acceptGreedy(r.drafts, verify_logits_)
                                      : acceptSampled(r.drafts, draft_q_.defined() ? draft_q_ : verify_p_.narrow(0, 0, 0),
                                                      verify_p_, generator_);
  r.accepted = result.accepted;
  r.next_token = result.next_token;
  r.bonus = result.bonus;
  r.uniforms = result.uniforms;

  std::vector<std::pair<int64_t, TokenOrigin>> emitted;
  for (int64_t i = 0; i < result.accepted; ++i) emitted.emplace_back(r.drafts[i], TokenOrigin::AcceptedDraft);
  emitted.emplace_back(result.next_token, result.bonus ? TokenOrigin::Bonus : TokenOrigin::Correction);
  for (const auto& [token, origin] : emitted) {
    record_.sequence.push_back(token);
    record_.origins.push_back(origin);
    r.emitted.push_back(token);
    if (!options_.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
      r.hit_eos = true;
      break;
    }
  }
  // The bonus token is fed (its row written) by the next round's forwards.
  if (r.bonus) bonus_position_[0] = bonus_position_[1] = static_cast<int64_t>(record_.sequence.size()) - 1;
  r.accept_ms = millisecondsSince(start);
  next_phase_ = Phase::Prune;
}

void Session::runPrune() {
  RoundRecord& r = record_.rounds.back();
  const auto start = Clock::now();
  const int64_t new_length = static_cast<int64_t>(record_.sequence.size());  // L'
  // Rows at positions >= L + n were computed from a rejected draft (or after one).
  const int64_t first_wrong = r.start_length + r.accepted;
  // Exact: each cache keeps L' - 1 entries (the newest token is fed next
  // round). Seed variant: one fewer, and that token is re-fed.
  const int64_t keep = options_.bookkeeping == Bookkeeping::Exact ? new_length - 1 : new_length - 2;
  pruneCache(CacheRole::Target, keep, first_wrong);
  pruneCache(CacheRole::Drafter, keep, first_wrong);
  slideWindows(CacheRole::Target);
  if (drafter_cache_) slideWindows(CacheRole::Drafter);
  // The rejected drafts' queries are gone with their tokens.
  evidence_.keepQueriesBefore(static_cast<int64_t>(believed_target_.size()));
  if (recompressDue(/*any_round=*/false)) compressTarget();

  if (options_.adaptive_gamma && !r.drafts.empty()) {
    const bool all_accepted = r.accepted == static_cast<int64_t>(r.drafts.size());
    gamma_ = std::clamp<int64_t>(gamma_ + (all_accepted ? 2 : -1), options_.gamma_min, options_.gamma_max);
  }
  r.prune_ms = millisecondsSince(start);
  r.prune_done = true;
  finished_ = r.hit_eos || static_cast<int64_t>(generated().size()) >= options_.max_new_tokens;
  ++round_index_;
  next_phase_ = Phase::Draft;
}

}  // namespace kvscope
