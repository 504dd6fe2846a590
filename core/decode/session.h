#pragma once
// A speculative decoding session that can be advanced one phase or one round
// at a time: prefill, then rounds of draft -> verify -> accept -> prune, with
// the cache on or off. Everything it does is recorded (rounds, cache ledger,
// verify logits and attention) for the CLI, the diff and the GUI.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/cache/cache_compression.h"
#include "core/cache/block_pool.h"
#include "core/cache/cache_event_log.h"
#include "core/cache/fault.h"
#include "core/cache/fault_policy.h"
#include "core/cache/kv_cache.h"
#include "core/cache/tracked_cache.h"
#include "core/decode/drafter.h"
#include "core/decode/sampling.h"
#include "core/decode/eviction_evidence.h"
#include "core/decode/session_eviction.h"
#include "core/decode/session_options.h"
#include "core/model/causal_lm.h"
#include "core/trace/metrics.h"
#include "core/trace/record_budget.h"
#include "core/trace/session_record.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// Where a session sits in a batch (core/decode/batch_session.h): its row and
// the batch's size, and with the paged layout the block pools every sequence
// of the batch allocates from (null: the session makes its own). A session
// alone is row 0 of 1.
struct BatchPlace {
  int64_t sequence = 0;
  int64_t size = 1;
  std::shared_ptr<BlockPool> target_pool;
  std::shared_ptr<BlockPool> drafter_pool;
};

// The dtype a session's caches store K/V in: the compute dtype (nullopt), or
// float16 under the half-cache fault.
c10::optional<c10::ScalarType> cacheStorageOf(const SessionOptions& options);

class Session {
 public:
  // drafter may be nullptr: then every round is a plain target step (gamma 0).
  // Throws Error for a drafter whose vocabulary differs from the target's, a
  // prompt that does not fit the context, or bad options.
  // runner: how the session's forwards reach the models (nullptr: each at
  // once); a batch's sessions share one that joins them (core/decode/batch_session.h).
  Session(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
          std::vector<int64_t> prompt, SessionOptions options, std::vector<int64_t> eos_ids,
          ForwardRunner* runner = nullptr, BatchPlace place = {});
  ~Session();

  // --- advancing ---------------------------------------------------------
  bool finished() const { return finished_; }
  Phase nextPhase() const { return next_phase_; }
  int64_t currentRound() const { return round_index_; }  // the round nextPhase() belongs to
  void stepPhase();
  void stepRound();  // runs phases until the current round has been pruned
  // Runs until finished, or until *cancel becomes true. It is checked between
  // phases: every phase is one forward per model except draft (gamma drafter
  // forwards), so a stop takes effect within one phase.
  void runToEnd(const std::atomic<bool>* cancel = nullptr);
  // In a batch, before the prune phase: the most drafts any sequence of the
  // batch accepted this round (what a batched engine's rollback knows; a
  // fault may cut by it instead of this sequence's own count).
  void noteBatchAcceptance(int64_t most_accepted) { batch_most_accepted_ = most_accepted; }
  const BatchPlace& batchPlace() const { return place_; }

  // --- state -------------------------------------------------------------
  const SessionOptions& options() const { return options_; }
  const CausalLM& target() const { return *target_; }
  const Drafter* drafter() const { return drafter_.get(); }
  // Everything recorded so far (core/trace/session_record.h).
  const SessionRecord& record() const { return record_; }
  const std::vector<int64_t>& sequence() const { return record_.sequence; }
  const std::vector<TokenOrigin>& origins() const { return record_.origins; }
  int64_t promptLength() const { return record_.prompt_length; }
  std::vector<int64_t> generated() const;
  const std::vector<RoundRecord>& rounds() const { return record_.rounds; }  // [0] is the prefill
  const std::map<int64_t, VerifyRecord>& verifyRecords() const { return record_.verify; }
  const CacheEventLog& events() const { return record_.events; }
  // The drafter's logits for each draft of a round: [drafts, vocab] (model drafter only).
  const std::map<int64_t, at::Tensor>& draftLogits() const { return draft_logits_; }
  // The tokens the engine believes a cache holds, in order. A correct engine's
  // cache holds exactly their K/V rows; a fault makes the two disagree, which
  // is what the audit checks.
  const std::vector<int64_t>& believedCacheTokens(CacheRole role) const;
  const KvLedger& ledger() const { return record_.ledger; }
  // What the trace budget kept and dropped so far.
  const RecordBudget& recordBudget() const { return record_budget_; }
  const KvCache* targetCache() const { return target_cache_ ? &target_cache_->storage() : nullptr; }
  const KvCache* drafterCache() const { return drafter_cache_ ? &drafter_cache_->storage() : nullptr; }
  int64_t currentGamma() const { return gamma_; }
  Metrics metrics() const;

 private:
  void runPrefill();
  void runDraft();
  void runVerify();
  void runAccept();
  void runPrune();

  // Feeds sequence[cache_length..] (+ extra tokens) to a model through its
  // tracked cache (which logs the write). Returns the logits of the last
  // `logit_rows` fed tokens [logit_rows, vocab] (all of them with kAllRows).
  // copy_to: a second cache that takes the same rows (TrackedCache::copyRows).
  at::Tensor feed(CacheRole role, const std::vector<int64_t>& tokens_after_cache, Phase phase,
                  ProbeSink* probes = nullptr, int64_t logit_rows = CausalLM::kAllRows, TrackedCache* copy_to = nullptr);
  // Whether the drafter is the target itself, so that its prefill rows are
  // the target's (copied, not recomputed; no fault, which may act on one cache).
  bool drafterSharesTargetPrefill() const;
  // The target's prefill forward (also recording into `also`, writing the
  // same rows into `copy_to`), its sliding windows and the session's eviction.
  void prefillTarget(const std::vector<int64_t>& prefix, ProbeSink* also, TrackedCache* copy_to);
  // The eviction policy's compression of the target's cache (after the
  // prefill, or after a prune), logged as one Evict event.
  void compressTarget();
  // Whether the eviction re-compresses after this round's prune (any_round:
  // after some round's, so the verify pass must keep its attention).
  bool recompressDue(bool any_round) const;
  // The moment of a removal outside a forward: the prefill's, or this round's prune.
  Moment removalMoment() const;
  TrackedCache* cacheOf(CacheRole role) const;
  std::unique_ptr<TrackedCache> makeTrackedCache(CacheRole role, const CausalLM& model);
  // The storage of a cache of `model`: contiguous, or a block table in the
  // role's pool (the batch's, else one of this session's own).
  std::unique_ptr<KvCache> makeStorage(CacheRole role, const CausalLM& model);
  // Refuses what the paged layout does not hold yet: sliding windows, a
  // drafter over a compressed copy of the cache.
  void refuseUnsupportedLayout() const;
  // Refuses what the padded batch layout does not hold: sliding windows, a
  // drafter over a compressed copy of the cache.
  void refuseUnsupportedPadding() const;
  c10::optional<c10::ScalarType> cacheStorage() const;

  std::shared_ptr<const CausalLM> target_;
  std::shared_ptr<const Drafter> drafter_;
  SessionOptions options_;
  FaultPolicy faults_;
  std::vector<int64_t> eos_ids_;
  ForwardRunner* runner_;
  BatchPlace place_;
  int64_t batch_most_accepted_ = -1;
  at::Generator generator_;

  SessionRecord record_;
  RecordBudget record_budget_;
  std::unique_ptr<TrackedCache> target_cache_;   // null with the cache off
  std::unique_ptr<TrackedCache> drafter_cache_;  // null with the cache off or without a drafter model
  EvictionEvidence evidence_;      // the target's attention since the last compression

  Phase next_phase_ = Phase::Prefill;
  int64_t round_index_ = 0;
  int64_t gamma_ = 0;
  bool finished_ = false;
  std::map<int64_t, at::Tensor> draft_logits_;

  // Working state of the round in progress.
  at::Tensor draft_q_;       // [drafts, vocab] processed drafter distributions
  at::Tensor verify_p_;      // [drafts + 1, vocab] processed target distributions (sampling only)
  at::Tensor verify_logits_; // [drafts + 1, vocab]
};

}  // namespace kvscope
