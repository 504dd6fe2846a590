#include "core/audit/cache_diff.h"

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/scoring.h"
#include "core/trace/trace_json.h"

namespace kvscope {

PositionDiff comparePosition(const at::Tensor& cached, const at::Tensor& uncached, const DiffTolerances& tol) {
  PositionDiff d;
  const auto c = cached.to(torch::kFloat64), u = uncached.to(torch::kFloat64);  // [vocab]
  d.max_abs_logit_diff = (c - u).abs().max().item<double>();
  const auto log_p = u.log_softmax(0), log_q = c.log_softmax(0);
  d.kl = klDivergence(log_p, log_q);
  const auto top2 = std::get<0>(u.topk(2));
  d.top2_margin = (top2[0] - top2[1]).item<double>();
  d.top1_cached = c.argmax().item<int64_t>();
  d.top1_uncached = u.argmax().item<int64_t>();
  d.top1_agree = d.top1_cached == d.top1_uncached;
  // A flip "inside the margin": the two best logits are closer than the
  // perturbation could move them.
  const bool flip_inside_margin = !d.top1_agree && d.top2_margin <= 2 * d.max_abs_logit_diff;
  if (d.max_abs_logit_diff <= tol.agree && d.top1_agree) {
    d.verdict = PositionClass::Agree;
  } else if (d.max_abs_logit_diff <= tol.noise && (d.top1_agree || flip_inside_margin)) {
    d.verdict = PositionClass::Noise;
  } else {
    d.verdict = PositionClass::Divergent;
  }
  return d;
}

namespace {

void tally(DiffReport& report, PositionDiff d) {
  report.max_abs_logit_diff = std::max(report.max_abs_logit_diff, d.max_abs_logit_diff);
  report.min_top2_margin = report.positions.empty() ? d.top2_margin : std::min(report.min_top2_margin, d.top2_margin);
  if (!d.top1_agree) ++report.top1_flips;
  (d.verdict == PositionClass::Agree ? report.agree : d.verdict == PositionClass::Noise ? report.noise
                                                                                         : report.divergent) += 1;
  report.positions.push_back(d);
}

// Rows [first, first + count) of an uncached forward over `tokens`.
at::Tensor uncachedRows(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t first, int64_t count) {
  const int64_t tail = static_cast<int64_t>(tokens.size()) - first;  // no logits for the rows before
  return model.forward(idsTensor(tokens), 0, nullptr, nullptr, tail).narrow(0, 0, count).to(torch::kFloat32);
}

// Compares `count` rows of cached logits with the uncached recomputation;
// returns the index of the first divergent row, if any.
std::optional<int64_t> compareRows(DiffReport& report, CacheRole role, int64_t round, int64_t first_position,
                                   const at::Tensor& cached, const at::Tensor& uncached, const DiffTolerances& tol) {
  std::optional<int64_t> first_bad;
  for (int64_t i = 0; i < cached.size(0); ++i) {
    PositionDiff d = comparePosition(cached[i], uncached[i], tol);
    d.cache = role;
    d.round = round;
    d.position = first_position + i;
    if (d.verdict == PositionClass::Divergent && !first_bad) first_bad = i;
    tally(report, d);
  }
  return first_bad;
}

void noteDivergence(DiffReport& report, const Session& session, CacheRole role, Phase phase, int64_t round,
                    int64_t position) {
  if (report.first_divergence) return;
  FirstDivergence first{role, round, phase, position, std::nullopt, std::nullopt, std::nullopt};
  const CausalLM* model = role == CacheRole::Target ? &session.target() : session.drafter()->model();
  if (model) {
    CacheAudit audit = auditAt(session.record(), role, {round, phase}, model);
    if (const RowVerdict* bad = audit.firstBad()) {
      first.layer = bad->layer;
      first.head = bad->worst_head;
      first.row = bad->row;
    }
    report.audit_at_divergence = std::move(audit);
  }
  report.first_divergence = first;
}

}  // namespace

void compareLockstepPhase(DiffReport& report, const Session& session, Phase phase, int64_t round,
                          const DiffTolerances& tol) {
  if (phase != Phase::Draft && phase != Phase::Verify) return;
  const RoundRecord& r = session.rounds().back();
  const int64_t start = r.start_length;
  std::vector<int64_t> tokens = session.sequence();  // accept has not run: the round's start sequence
  if (phase == Phase::Draft) {
    const auto it = session.draftLogits().find(round);
    if (it == session.draftLogits().end()) return;  // n-gram drafter or no drafts
    const int64_t k = it->second.size(0);
    tokens.insert(tokens.end(), r.drafts.begin(), r.drafts.begin() + (k - 1));
    const auto uncached = uncachedRows(*session.drafter()->model(), tokens, start - 1, k);
    if (auto bad = compareRows(report, CacheRole::Drafter, round, start - 1, it->second, uncached, tol)) {
      noteDivergence(report, session, CacheRole::Drafter, Phase::Draft, round, start - 1 + *bad);
    }
    return;
  }
  const VerifyRecord& v = session.verifyRecords().at(round);
  if (!v.logits.defined()) return;  // logits not recorded (the newest round is never over budget)
  const int64_t queries = v.logits.size(0);
  tokens.insert(tokens.end(), r.drafts.begin(), r.drafts.end());
  const auto uncached = uncachedRows(session.target(), tokens, start - 1, queries);
  if (auto bad = compareRows(report, CacheRole::Target, round, start - 1, v.logits, uncached, tol)) {
    noteDivergence(report, session, CacheRole::Target, Phase::Verify, round, start - 1 + *bad);
  }
}

void concludeLockstep(DiffReport& report, const Session& session, const TokenText& text) {
  RootCauseOptions options;
  options.target = &session.target();
  options.drafter = session.drafter() ? session.drafter()->model() : nullptr;
  options.sequence = session.batchPlace().sequence;
  if (report.first_divergence) options.check_values_until = Moment{report.first_divergence->round, report.first_divergence->phase};
  report.root_cause = findRootCause(session.record(), options, text);
  if (report.first_divergence && !report.root_cause) {
    const FirstDivergence& first = *report.first_divergence;
    report.eviction_cause = evictionBefore(session.record(), first.cache, {first.round, first.phase});
  }
}

DiffReport diffLockstep(Session& session, const DiffTolerances& tol, const std::atomic<bool>* cancel,
                        const TokenText& text) {
  require(session.options().use_cache, "lockstep diff: the session under test must use the KV cache");
  c10::InferenceMode guard;
  DiffReport report;
  report.mode = "lockstep";
  while (!session.finished() && !(cancel && cancel->load())) {
    const Phase phase = session.nextPhase();
    const int64_t round = session.currentRound();
    session.stepPhase();
    compareLockstepPhase(report, session, phase, round, tol);
  }
  concludeLockstep(report, session, text);
  return report;
}

DiffReport diffFreeRunning(Session& cached, Session& uncached, const DiffTolerances& tol) {
  c10::InferenceMode guard;
  DiffReport report;
  report.mode = "free";
  cached.runToEnd();
  uncached.runToEnd();
  report.cached_tokens = cached.generated();
  report.uncached_tokens = uncached.generated();
  const size_t common = std::min(report.cached_tokens.size(), report.uncached_tokens.size());
  size_t first = 0;
  while (first < common && report.cached_tokens[first] == report.uncached_tokens[first]) ++first;
  const bool differ = first < common || report.cached_tokens.size() != report.uncached_tokens.size();
  // Logits of the rounds both runs shared, up to the first differing token.
  const int64_t limit = cached.promptLength() + static_cast<int64_t>(first);
  for (const RoundRecord& r : cached.rounds()) {
    if (r.index == 0 || r.start_length > limit) continue;
    const auto it = uncached.verifyRecords().find(r.index);
    if (it == uncached.verifyRecords().end() || uncached.rounds().size() <= static_cast<size_t>(r.index)) continue;
    const RoundRecord& other = uncached.rounds()[r.index];
    if (other.drafts != r.drafts || other.start_length != r.start_length) continue;  // different streams
    // A long session's trace budget may have dropped old rounds' logits:
    // the tokens above still compare every round, the logits only those kept.
    if (!cached.verifyRecords().at(r.index).logits.defined() || !it->second.logits.defined()) continue;
    compareRows(report, CacheRole::Target, r.index, r.start_length - 1, cached.verifyRecords().at(r.index).logits,
                it->second.logits, tol);
  }
  if (differ) {
    report.first_token_divergence = static_cast<int64_t>(first);
    const int64_t position = cached.promptLength() + static_cast<int64_t>(first);
    int64_t round = 0;
    for (const RoundRecord& r : cached.rounds()) {
      if (r.index > 0 && r.start_length <= position) round = r.index;
    }
    report.first_divergence =
        FirstDivergence{CacheRole::Target, round, Phase::Verify, position, std::nullopt, std::nullopt, std::nullopt};
    // Free-running has no root cause; an eviction the cached run made is what the tokens follow.
    report.eviction_cause = evictionBefore(cached.record(), CacheRole::Target, {round, Phase::Verify});
  }
  return report;
}

}  // namespace kvscope
