#include "core/decode/session.h"

#include <algorithm>
#include <chrono>

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

// Collects the attention weights of every layer during one forward.
class AttentionRecorder : public ProbeSink {
 public:
  explicit AttentionRecorder(int64_t layers) : weights(layers) {}
  bool wants(Probe probe, int64_t) const override { return probe == Probe::AttentionWeights; }
  void record(Probe, int64_t layer, const at::Tensor& value) override { weights[layer] = value; }
  std::vector<at::Tensor> weights;  // per layer [heads, queries, keys]
};

}  // namespace

void SessionOptions::validate() const {
  require(gamma >= 0, "gamma must be >= 0, got " + std::to_string(gamma));
  require(gamma_min >= 1 && gamma_max >= gamma_min, "adaptive gamma bounds must satisfy 1 <= min <= max");
  require(!adaptive_gamma || (gamma >= gamma_min && gamma <= gamma_max),
          "the starting gamma must lie within the adaptive bounds");
  require(max_new_tokens >= 1, "max new tokens must be >= 1, got " + std::to_string(max_new_tokens));
  sampling.validate();
}

Session::Session(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
                 std::vector<int64_t> prompt, SessionOptions options, std::vector<int64_t> eos_ids)
    : target_(std::move(target)),
      drafter_(std::move(drafter)),
      options_(std::move(options)),
      eos_ids_(std::move(eos_ids)),
      generator_(makeGenerator(options_.seed)),
      sequence_(std::move(prompt)) {
  require(target_ != nullptr, "session: no target model");
  options_.validate();
  checkFitsContext(*target_, static_cast<int64_t>(sequence_.size()), options_.max_new_tokens);
  const int64_t vocab = target_->config().vocab_size;
  for (int64_t id : sequence_) {
    require(id >= 0 && id < vocab, "prompt token id " + std::to_string(id) + " is outside the target's vocabulary (size " +
                                       std::to_string(vocab) + ")");
  }
  if (const CausalLM* draft_model = drafter_ ? drafter_->model() : nullptr) {
    const int64_t drafter_vocab = draft_model->config().vocab_size;
    if (drafter_vocab != vocab) {
      throw Error("the drafter's vocabulary (" + std::to_string(drafter_vocab) + " ids) does not match the target's (" +
                  std::to_string(vocab) + " ids); speculative decoding needs one shared vocabulary");
    }
    checkFitsContext(*draft_model, static_cast<int64_t>(sequence_.size()), options_.max_new_tokens);
    if (options_.use_cache) drafter_cache_ = draft_model->makeCache(cacheStorage());
  }
  if (options_.use_cache) target_cache_ = target_->makeCache(cacheStorage());
  prompt_length_ = static_cast<int64_t>(sequence_.size());
  origins_.assign(sequence_.size(), TokenOrigin::Prompt);
  gamma_ = drafter_ ? options_.gamma : 0;
}

Session::~Session() = default;

c10::optional<c10::ScalarType> Session::cacheStorage() const {
  if (options_.fault == Fault::HalfCache) return torch::kFloat16;
  return c10::nullopt;  // the compute dtype
}

std::vector<int64_t> Session::generated() const {
  return std::vector<int64_t>(sequence_.begin() + prompt_length_, sequence_.end());
}

Metrics Session::metrics() const { return computeMetrics(rounds_); }

KvCache* Session::cacheOf(CacheRole role) const {
  return role == CacheRole::Target ? target_cache_.get() : drafter_cache_.get();
}

std::vector<int64_t>& Session::believed(CacheRole role) {
  return role == CacheRole::Target ? believed_target_ : believed_drafter_;
}

const std::vector<int64_t>& Session::believedCacheTokens(CacheRole role) const {
  return role == CacheRole::Target ? believed_target_ : believed_drafter_;
}

at::Tensor Session::feed(CacheRole role, const std::vector<int64_t>& tokens, Phase phase, ProbeSink* probes) {
  const CausalLM& model = role == CacheRole::Target ? *target_ : *drafter_->model();
  KvCache* cache = cacheOf(role);
  RoundRecord& record = rounds_.back();
  (role == CacheRole::Target ? record.target_forwards : record.drafter_forwards) += 1;
  if (cache == nullptr) return model.forward(idsTensor(tokens), 0, nullptr, probes);  // [all, vocab]

  // Feed only the tokens the cache does not hold yet, at explicit positions.
  std::vector<int64_t>& held = believed(role);
  int64_t start = static_cast<int64_t>(held.size());
  int64_t position = start + (role == CacheRole::Target ? position_shift_target_ : position_shift_drafter_);
  const Fault fault = options_.fault;
  if (fault == Fault::FullPrefixWithCache && role == CacheRole::Target && phase == Phase::Verify) {
    start = position = 0;  // the bug: the whole prefix again, on top of the cache
  }
  const std::vector<int64_t> pending(tokens.begin() + start, tokens.end());
  const int64_t n = static_cast<int64_t>(pending.size());
  std::vector<int64_t> rows_before;
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) rows_before.push_back(cache->length(layer));

  const auto ids = idsTensor(pending);
  auto logits = fault == Fault::None ? model.forward(ids, position, cache, probes)  // invariant asserted
                                     : model.forwardUnchecked(ids, position, cache, probes);  // [n, vocab]
  std::vector<at::Tensor> k_rows, v_rows;
  for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
    k_rows.push_back(cache->keys(layer).narrow(1, rows_before[layer], n));  // [kv_heads, n, head_dim]
    v_rows.push_back(cache->values(layer).narrow(1, rows_before[layer], n));
  }
  ledger_.recordBirths(role, start, pending, torch::stack(k_rows), torch::stack(v_rows), round_index_, phase);
  record.cache_ops.push_back({role, phase, CacheOp::Kind::Append, rows_before[0], cache->length()});
  held.resize(start);
  held.insert(held.end(), pending.begin(), pending.end());
  return logits;
}

void Session::cropPhysically(CacheRole role, int64_t new_length, bool all_layers, DeathReason reason,
                             int64_t first_wrong_position) {
  KvCache* cache = cacheOf(role);
  const int64_t from = cache->length();
  new_length = std::clamp<int64_t>(new_length, 0, from);
  if (new_length == from) return;
  if (all_layers) {
    cache->crop(new_length);
  } else {  // partial-layer-crop: only the first half of the layers
    for (int64_t layer = 0; layer < (cache->numLayers() + 1) / 2; ++layer) {
      cache->cropLayer(layer, std::min(new_length, cache->length(layer)));
    }
  }
  ledger_.recordCrop(role, new_length, round_index_, Phase::Prune, reason, first_wrong_position);
  rounds_.back().cache_ops.push_back({role, Phase::Prune, new_length == 0 ? CacheOp::Kind::Clear : CacheOp::Kind::Crop,
                                      from, cache->length()});
}

void Session::pruneCache(CacheRole role, int64_t keep, int64_t first_wrong_position) {
  KvCache* cache = cacheOf(role);
  if (cache == nullptr) return;
  std::vector<int64_t>& held = believed(role);
  const int64_t held_length = static_cast<int64_t>(held.size());
  const bool target = role == CacheRole::Target;
  const Fault fault = options_.fault;
  // Off by one the other way: one more entry is always dropped, never re-fed.
  if (fault == Fault::PruneLongNoRefeed && target) {
    held.resize(std::min(keep, held_length));
    cropPhysically(role, std::min(keep, held_length) - 1, true, DeathReason::RejectedDraft, first_wrong_position);
    return;
  }
  if (keep >= held_length) return;  // nothing to drop
  const int64_t dropped = held_length - keep;
  held.resize(keep);  // what the engine believes from now on
  const bool nothing_accepted = rounds_.back().accepted == 0;
  if ((fault == Fault::NoPrune && target) || (fault == Fault::DrafterNotPruned && !target) ||
      (fault == Fault::CropZeroNoop && nothing_accepted)) {
    return;  // the rows stay
  }
  if (fault == Fault::StaleRope) (target ? position_shift_target_ : position_shift_drafter_) += dropped;
  int64_t physical = keep;
  DeathReason reason = DeathReason::RejectedDraft;
  if (fault == Fault::PruneShort && target) physical = keep + 1;
  if (fault == Fault::ResetNotRollback && target) {
    physical = 0;
    reason = DeathReason::Reset;
  }
  cropPhysically(role, physical, !(fault == Fault::PartialLayerCrop && target), reason, first_wrong_position);
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
  record.start_length = prompt_length_;
  rounds_.push_back(record);
  // Every token but the last goes into the caches; the last is fed by the
  // first round (so each round starts with L - 1 entries for L tokens).
  const std::vector<int64_t> prefix(sequence_.begin(), sequence_.end() - 1);
  if (!prefix.empty() && options_.use_cache) {
    auto start = Clock::now();
    feed(CacheRole::Target, prefix, Phase::Prefill);
    rounds_.back().verify_ms = millisecondsSince(start);
    if (drafter_cache_) {
      start = Clock::now();
      feed(CacheRole::Drafter, prefix, Phase::Prefill);
      rounds_.back().draft_ms = millisecondsSince(start);
    }
  }
  round_index_ = 1;
  next_phase_ = Phase::Draft;
}

void Session::runDraft() {
  RoundRecord record;
  record.index = round_index_;
  record.start_length = static_cast<int64_t>(sequence_.size());
  const int64_t remaining = options_.max_new_tokens - static_cast<int64_t>(generated().size());
  // Never draft the last token: the round's own next token fills it.
  record.gamma = std::max<int64_t>(0, std::min(gamma_, remaining - 1));
  rounds_.push_back(record);
  RoundRecord& r = rounds_.back();
  const auto start = Clock::now();
  const int64_t vocab = target_->config().vocab_size;
  std::vector<at::Tensor> q_rows;

  if (r.gamma > 0 && drafter_ && drafter_->model() == nullptr) {
    const auto& ngram = static_cast<const NgramDrafter&>(*drafter_);
    r.drafts = ngram.propose(sequence_, r.gamma);
    for (int64_t d : r.drafts) {
      q_rows.push_back(torch::nn::functional::one_hot(torch::tensor(d), vocab).to(torch::kFloat32));
      r.q_draft.push_back(1.0);
    }
  } else if (r.gamma > 0 && drafter_) {
    std::vector<int64_t> tokens = sequence_;
    std::vector<at::Tensor> draft_rows;
    for (int64_t i = 0; i < r.gamma; ++i) {
      const auto logits = feed(CacheRole::Drafter, tokens, Phase::Draft)[-1].to(torch::kFloat32);  // [vocab]
      draft_rows.push_back(logits);
      const auto q = processedProbs(logits, options_.sampling);
      const int64_t d = options_.sampling.greedy ? q.argmax().item<int64_t>() : sampleFrom(q, generator_);
      q_rows.push_back(q);
      r.q_draft.push_back(options_.sampling.greedy ? logits.softmax(0)[d].item<double>() : q[d].item<double>());
      r.drafts.push_back(d);
      tokens.push_back(d);
      // Like HF, stop drafting once the drafter proposes an end of sequence.
      if (!options_.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), d) != eos_ids_.end()) break;
    }
    draft_logits_[r.index] = torch::stack(draft_rows);  // [drafts, vocab]
  }
  draft_q_ = q_rows.empty() ? at::Tensor() : torch::stack(q_rows);  // [drafts, vocab]
  r.draft_ms = millisecondsSince(start);
  next_phase_ = Phase::Verify;
}

void Session::runVerify() {
  RoundRecord& r = rounds_.back();
  const auto start = Clock::now();
  std::vector<int64_t> tokens = sequence_;
  tokens.insert(tokens.end(), r.drafts.begin(), r.drafts.end());
  const int64_t queries = static_cast<int64_t>(r.drafts.size()) + 1;  // p_1 .. p_{k+1}
  AttentionRecorder attention(target_->config().num_layers);
  const auto logits = feed(CacheRole::Target, tokens, Phase::Verify, options_.record_attention ? &attention : nullptr);
  verify_logits_ = logits.narrow(0, logits.size(0) - queries, queries).to(torch::kFloat32);  // [k + 1, vocab]
  std::vector<at::Tensor> p_rows;
  for (int64_t i = 0; i < queries; ++i) p_rows.push_back(processedProbs(verify_logits_[i], options_.sampling));
  verify_p_ = torch::stack(p_rows);  // [k + 1, vocab]
  for (size_t i = 0; i < r.drafts.size(); ++i) {
    const auto& dist = options_.sampling.greedy ? verify_logits_[i].softmax(0) : verify_p_[i];
    r.p_draft.push_back(dist[r.drafts[i]].item<double>());
  }

  VerifyRecord verify;
  verify.first_query_position = r.start_length - 1;
  if (options_.record_logits) verify.logits = verify_logits_.clone();
  if (options_.record_attention) {
    for (const auto& w : attention.weights) {  // [heads, fed, keys] -> the verified query rows
      verify.attention.push_back(w.narrow(1, w.size(1) - queries, queries).to(torch::kFloat32).clone());
    }
  }
  verify_records_[r.index] = std::move(verify);
  r.verify_ms = millisecondsSince(start);
  next_phase_ = Phase::Accept;
}

void Session::runAccept() {
  RoundRecord& r = rounds_.back();
  const auto start = Clock::now();
  const AcceptanceResult result = options_.sampling.greedy
                                      ? acceptGreedy(r.drafts, verify_p_)
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
    sequence_.push_back(token);
    origins_.push_back(origin);
    r.emitted.push_back(token);
    if (!options_.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
      r.hit_eos = true;
      break;
    }
  }
  r.accept_ms = millisecondsSince(start);
  next_phase_ = Phase::Prune;
}

void Session::runPrune() {
  RoundRecord& r = rounds_.back();
  const auto start = Clock::now();
  const int64_t new_length = static_cast<int64_t>(sequence_.size());  // L'
  // Rows at positions >= L + n were computed from a rejected draft (or after one).
  const int64_t first_wrong = r.start_length + r.accepted;
  // Exact: each cache keeps L' - 1 entries (the newest token is fed next
  // round). Seed variant: one fewer, and that token is re-fed.
  const int64_t keep = options_.bookkeeping == Bookkeeping::Exact ? new_length - 1 : new_length - 2;
  pruneCache(CacheRole::Target, keep, first_wrong);
  pruneCache(CacheRole::Drafter, keep, first_wrong);

  if (options_.adaptive_gamma && !r.drafts.empty()) {
    const bool all_accepted = r.accepted == static_cast<int64_t>(r.drafts.size());
    gamma_ = std::clamp<int64_t>(gamma_ + (all_accepted ? 2 : -1), options_.gamma_min, options_.gamma_max);
  }
  r.prune_ms = millisecondsSince(start);
  finished_ = r.hit_eos || static_cast<int64_t>(generated().size()) >= options_.max_new_tokens;
  ++round_index_;
  next_phase_ = Phase::Draft;
}

}  // namespace kvscope
