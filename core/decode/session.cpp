#include "core/decode/session.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "core/decode/autoregressive.h"
#include "core/decode/speculative_acceptance.h"
#include "core/error.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

Session::Session(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
                 std::vector<int64_t> prompt, SessionOptions options, std::vector<int64_t> eos_ids,
                 ForwardRunner* runner, BatchPlace place)
    : target_(std::move(target)),
      drafter_(std::move(drafter)),
      options_(std::move(options)),
      faults_(options_.fault),
      eos_ids_(std::move(eos_ids)),
      runner_(runner != nullptr ? runner : &directForwards()),
      place_(place),
      generator_(makeGenerator(options_.seed)),
      // Clamped so that an invalid value (refused just below) cannot overflow.
      record_budget_(std::clamp<int64_t>(options_.trace_budget_mb, 0, SessionLimits::kMaxTraceBudgetMb) * 1024 * 1024) {
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
  refuseUnsupportedLayout();
  if (const CausalLM* draft_model = drafter_ ? drafter_->model() : nullptr) {
    const int64_t drafter_vocab = draft_model->config().vocab_size;
    if (drafter_vocab != vocab) {
      throw Error("the drafter's vocabulary (" + std::to_string(drafter_vocab) + " ids) does not match the target's (" +
                  std::to_string(vocab) + " ids); speculative decoding needs one shared vocabulary");
    }
    checkFitsContext(*draft_model, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
    if (options_.use_cache) checkCacheStaysValid(*draft_model, static_cast<int64_t>(record_.sequence.size()), options_.max_new_tokens);
    record_.drafter_layers = draft_model->config().num_layers;
    if (options_.use_cache) drafter_cache_ = makeTrackedCache(CacheRole::Drafter, *draft_model);
  }
  if (options_.use_cache) target_cache_ = makeTrackedCache(CacheRole::Target, *target_);
  require(options_.use_cache || !drafter_ || drafter_->type() != DrafterType::CompressedCache,
          "a drafter over a compressed copy of the cache needs the cache on");
  if (needsBatch(options_.fault) && place_.size < 2) {
    throw Error(std::string("fault ") + faultInfo(options_.fault).name +
                " acts on a batch of several sequences decoded together; give two or more prompts");
  }
  if (needsPagedCache(options_.fault) && !(options_.use_cache && options_.cache_layout.paged)) {
    throw Error(std::string("fault ") + faultInfo(options_.fault).name +
                " acts on a paged cache's block table; run with --cache-layout paged:BLOCK (e.g. paged:2, so that "
                "a rollback frees whole blocks)");
  }
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
  record_.prompt_length = static_cast<int64_t>(record_.sequence.size());
  record_.origins.assign(record_.sequence.size(), TokenOrigin::Prompt);
  gamma_ = drafter_ ? options_.gamma : 0;
}

Session::~Session() = default;

c10::optional<c10::ScalarType> cacheStorageOf(const SessionOptions& options) {
  if (FaultPolicy(options.fault).halfPrecisionStorage()) return torch::kFloat16;
  return c10::nullopt;  // the compute dtype
}

c10::optional<c10::ScalarType> Session::cacheStorage() const { return cacheStorageOf(options_); }

std::vector<int64_t> Session::generated() const {
  return std::vector<int64_t>(record_.sequence.begin() + record_.prompt_length, record_.sequence.end());
}

Metrics Session::metrics() const { return computeMetrics(record_.rounds); }

TrackedCache* Session::cacheOf(CacheRole role) const {
  return role == CacheRole::Target ? target_cache_.get() : drafter_cache_.get();
}

std::unique_ptr<TrackedCache> Session::makeTrackedCache(CacheRole role, const CausalLM& model) {
  std::vector<int64_t> windows;
  for (int64_t layer = 0; layer < model.config().num_layers; ++layer) windows.push_back(model.config().windowOf(layer));
  auto cache = std::make_unique<TrackedCache>(role, makeStorage(role, model), std::move(windows), faults_,
                                              record_.ledger, record_.events);
  cache->setForwardRunner(*runner_);
  return cache;
}

std::unique_ptr<KvCache> Session::makeStorage(CacheRole role, const CausalLM& model) {
  if (!options_.cache_layout.paged) return model.makeCache(cacheStorage());
  std::shared_ptr<BlockPool>& pool = role == CacheRole::Target ? place_.target_pool : place_.drafter_pool;
  if (!pool) pool = model.makeBlockPool(options_.cache_layout.block_size, cacheStorage());
  return std::make_unique<KvCache>(pool, place_.sequence);
}

void Session::refuseUnsupportedLayout() const {
  refuseUnsupportedPadding();
  if (!options_.cache_layout.paged) return;
  const auto refuse_windows = [](const CausalLM& model, const char* role) {
    for (int64_t l = 0; l < model.config().num_layers; ++l) {
      require(model.config().windowOf(l) <= 0,
              std::string("--cache-layout paged: the ") + role + " has sliding-window layers (layer " + std::to_string(l) +
                  "), whose rows leave from the front; the paged layout does not evict them yet");
    }
  };
  refuse_windows(*target_, "target");
  if (const CausalLM* draft_model = drafter_ ? drafter_->model() : nullptr) refuse_windows(*draft_model, "drafter");
  require(!drafter_ || drafter_->type() != DrafterType::CompressedCache,
          "--cache-layout paged: a drafter over a compressed copy of the cache compacts its rows, which the paged "
          "layout does not hold yet");
}

void Session::refuseUnsupportedPadding() const {
  if (options_.batch_layout != BatchLayout::Padded) return;
  const auto refuse_windows = [](const CausalLM& model, const char* role) {
    for (int64_t l = 0; l < model.config().num_layers; ++l) {
      require(model.config().windowOf(l) <= 0,
              std::string("--batch-layout padded: the ") + role + " has sliding-window layers (layer " +
                  std::to_string(l) + "), which count a window by rows; pad rows would take window places");
    }
  };
  refuse_windows(*target_, "target");
  if (const CausalLM* draft_model = drafter_ ? drafter_->model() : nullptr) refuse_windows(*draft_model, "drafter");
  require(!drafter_ || drafter_->type() != DrafterType::CompressedCache,
          "--batch-layout padded: a drafter over a compressed copy of the cache compacts its rows, pad rows "
          "included; the padded layout does not hold it");
}

const std::vector<int64_t>& Session::believedCacheTokens(CacheRole role) const {
  static const std::vector<int64_t> kNone;
  const TrackedCache* cache = cacheOf(role);
  return cache ? cache->believedTokens() : kNone;
}

Moment Session::removalMoment() const { return {round_index_, round_index_ == 0 ? Phase::Prefill : Phase::Prune}; }

at::Tensor Session::feed(CacheRole role, const std::vector<int64_t>& tokens, Phase phase, ProbeSink* probes,
                         int64_t logit_rows, TrackedCache* copy_to) {
  const CausalLM& model = role == CacheRole::Target ? *target_ : *drafter_->model();
  TrackedCache* cache = cacheOf(role);
  RoundRecord& record = record_.rounds.back();
  (role == CacheRole::Target ? record.target_forwards : record.drafter_forwards) += 1;
  if (cache == nullptr) return runner_->run(model, {idsTensor(tokens), 0, nullptr, probes, logit_rows, false, {}, nullptr});  // [rows, vocab]
  // The cache feeds only the tokens it does not hold yet, and logs the write.
  return cache->forward(model, phase, tokens, round_index_, probes, logit_rows, copy_to);  // [rows, vocab]
}

bool Session::drafterSharesTargetPrefill() const {
  // A padded batch pads each model's forward on its own: the target's pads are not the drafter's.
  return drafter_cache_ != nullptr && target_cache_ != nullptr && drafter_->model() == target_.get() &&
         !faults_.active() && options_.batch_layout != BatchLayout::Padded;
}

void Session::prefillTarget(const std::vector<int64_t>& prefix, ProbeSink* also, TrackedCache* copy_to) {
  const bool scored = options_.eviction && needsAttention(options_.eviction->settings.policy);
  evidence_.listen(scored, also, static_cast<int64_t>(prefix.size()));
  feed(CacheRole::Target, prefix, Phase::Prefill, scored || also ? &evidence_ : nullptr, /*logit_rows=*/0, copy_to);  // the cache is what a prefill is for
  evidence_.listen(false, nullptr, 0);
  target_cache_->slideWindows(removalMoment());
  if (options_.eviction) compressTarget();
}

bool Session::recompressDue(bool any_round) const {
  if (!options_.eviction || options_.eviction->recompress_every <= 0 || !target_cache_) return false;
  return any_round || round_index_ % options_.eviction->recompress_every == 0;
}

void Session::compressTarget() {
  const KvCache& storage = target_cache_->storage();
  EvictionSettings settings = options_.eviction->settings;
  const bool scored = needsAttention(settings.policy);
  const std::vector<int64_t> rows = target_cache_->rowsPerLayer();
  const int64_t queries = evidence_.queries();
  const std::vector<at::Tensor> attention = scored ? evidence_.attention(rows) : std::vector<at::Tensor>();  // [heads, q, rows[l]]
  evidence_.clear();
  if (rows.empty() || rows.front() == 0 || (scored && attention.empty())) return;  // nothing to score or remove
  // snapkv's observation window: at most the queries seen since the last compression.
  if (settings.window > queries && evictionPolicyInfo(settings.policy).window == PolicyWindow::LastQueries) {
    settings.window = queries;
  }
  const std::vector<int64_t> budgets = layerBudgets(settings, storage.numLayers(), rows.front());
  // The policy decides from what the cache holds; the cache takes the decision and logs it.
  const EvictionDecision decision = decideEviction(storage, settings, attention, budgets);
  const std::vector<RemovedRow> removed = target_cache_->evict(removalMoment(), evictionPolicyName(settings.policy), decision);
  // The log says what a policy did, as it says what a fault does: rows it
  // masks stay in the cache, so no row count shows it.
  spdlog::info("round {}: eviction {} masked {} (row, layer, kv head) entries of the target's cache ({} rows per layer held)",
               round_index_, options_.eviction->describe(), removed.size(), rows.front());
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
    RoundRecord& prefill = record_.rounds.back();
    // A drafter that is the target itself (compressed-cache self-speculation)
    // shares the target's prefill: one forward writes both caches, the
    // drafter's rows being the ones its own forward would compute bit for
    // bit, and the probes the drafter's prefill wants listen to that forward.
    // Each cache logs its write.
    const bool shared = drafterSharesTargetPrefill();
    auto start = Clock::now();
    const auto prefillTargetTimed = [&](ProbeSink* also, TrackedCache* copy_to) {
      prefillTarget(prefix, also, copy_to);
      prefill.verify_ms = millisecondsSince(start);
      start = Clock::now();
    };
    if (!shared) prefillTargetTimed(nullptr, nullptr);
    if (drafter_cache_) {
      bool fed = false;
      drafter_->prefill(*drafter_cache_, removalMoment(), [&](ProbeSink* probes) {
        if (shared) prefillTargetTimed(probes, drafter_cache_.get());
        else feed(CacheRole::Drafter, prefix, Phase::Prefill, probes, /*logit_rows=*/0);
        fed = true;
      });
      require(fed, "session: the drafter's prefill did not feed the prompt");
      drafter_cache_->slideWindows(removalMoment());
      prefill.draft_ms = millisecondsSince(start);
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
  draft_q_ = at::Tensor();
  if (r.gamma > 0 && drafter_) {
    // The drafter's network (if any) writes only through its tracked cache.
    auto feed_drafter = [this](const std::vector<int64_t>& stream) {
      return feed(CacheRole::Drafter, stream, Phase::Draft, nullptr, 1)[-1].to(torch::kFloat32);  // [vocab]
    };
    DraftRequest request{record_.sequence, r.gamma, options_.sampling, generator_, eos_ids_,
                         options_.ignore_eos, target_->config().vocab_size, feed_drafter};
    request.stop_below = options_.draft_confidence;
    Draft draft = drafter_->draft(request);
    r.drafts = std::move(draft.tokens);
    r.q_draft = std::move(draft.q_of_picks);
    draft_q_ = draft.q;  // [drafts, vocab]
    if (draft.logits.defined()) draft_logits_[r.index] = draft.logits;  // [drafts, vocab]
  }
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
    r.p_draft = options_.sampling.greedy ? softmaxOfPicks(verify_logits_, r.drafts)
                                         : probabilitiesOfPicks(verify_p_.narrow(0, 0, k), r.drafts);
  }

  VerifyRecord verify;
  verify.first_query_position = r.start_length - 1;
  if (options_.record_logits) verify.logits = verify_logits_.clone();
  if (options_.record_attention) {
    for (const auto& w : attention.weights) {  // [heads, fed, keys] -> the verified query rows
      // The forward made w for this recorder alone: kept as it is when it
      // holds just the verified rows, else those rows copied out of it.
      const bool whole = w.size(1) == queries && w.scalar_type() == torch::kFloat32 && w.is_contiguous();
      verify.attention.push_back(whole ? w : w.narrow(1, w.size(1) - queries, queries).to(torch::kFloat32).clone());
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
  if (r.bonus) {
    const int64_t bonus_position = static_cast<int64_t>(record_.sequence.size()) - 1;
    for (TrackedCache* cache : {target_cache_.get(), drafter_cache_.get()}) {
      if (cache) cache->expectBonusAt(bonus_position);
    }
  }
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
  const PruneRequestOfRound request{keep,
                                    first_wrong,
                                    r.accepted,
                                    options_.bookkeeping == Bookkeeping::Seed,
                                    batch_most_accepted_,
                                    place_.size > 1 && place_.sequence == place_.size - 1};
  batch_most_accepted_ = -1;  // noted for this round only
  for (TrackedCache* cache : {target_cache_.get(), drafter_cache_.get()}) {
    if (cache) cache->prune(round_index_, request);
  }
  for (TrackedCache* cache : {target_cache_.get(), drafter_cache_.get()}) {
    if (cache) cache->slideWindows(removalMoment());
  }
  // The rejected drafts' queries are gone with their tokens.
  evidence_.keepQueriesBefore(static_cast<int64_t>(believedCacheTokens(CacheRole::Target).size()));
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
