#pragma once
// A speculative decoding session that can be advanced one phase or one round
// at a time: prefill, then rounds of draft -> verify -> accept -> prune, with
// the cache on or off. Everything it does is recorded (rounds, cache ledger,
// verify logits and attention) for the CLI, the diff and the GUI.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/cache/fault.h"
#include "core/cache/kv_cache.h"
#include "core/decode/drafter.h"
#include "core/decode/sampling.h"
#include "core/model/causal_lm.h"
#include "core/trace/kv_ledger.h"
#include "core/trace/metrics.h"
#include "core/trace/trace_types.h"

namespace kvscope {

struct SessionOptions {
  int64_t gamma = 4;           // drafts per round (the start value when adaptive)
  bool adaptive_gamma = false; // +2 after a fully accepted round, -1 otherwise
  int64_t gamma_min = 1;
  int64_t gamma_max = 16;
  int64_t max_new_tokens = 64;
  bool use_cache = true;
  SamplingSettings sampling;
  uint64_t seed = 0;
  Bookkeeping bookkeeping = Bookkeeping::Exact;
  bool ignore_eos = false;
  bool record_attention = true;  // verify-pass attention of every layer, per round
  bool record_logits = true;     // verify-pass logits, per round
  Fault fault = Fault::None;     // an injected cache bug (core/cache/fault.h)

  void validate() const;  // throws Error naming the bad parameter
};

// What the verify forward of one round saw, kept for the diff and the GUI.
struct VerifyRecord {
  at::Tensor logits;                  // [queries, vocab] float32, the rows that scored drafts + next
  std::vector<at::Tensor> attention;  // per layer [heads, queries, keys] float32 (when recorded)
  int64_t first_query_position = 0;   // absolute position of the first query row
};

class Session {
 public:
  // drafter may be nullptr: then every round is a plain target step (gamma 0).
  // Throws Error for a drafter whose vocabulary differs from the target's, a
  // prompt that does not fit the context, or bad options.
  Session(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
          std::vector<int64_t> prompt, SessionOptions options, std::vector<int64_t> eos_ids);
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

  // --- state -------------------------------------------------------------
  const SessionOptions& options() const { return options_; }
  const CausalLM& target() const { return *target_; }
  const Drafter* drafter() const { return drafter_.get(); }
  const std::vector<int64_t>& sequence() const { return sequence_; }
  const std::vector<TokenOrigin>& origins() const { return origins_; }
  int64_t promptLength() const { return prompt_length_; }
  std::vector<int64_t> generated() const;
  const std::vector<RoundRecord>& rounds() const { return rounds_; }  // [0] is the prefill
  const std::map<int64_t, VerifyRecord>& verifyRecords() const { return verify_records_; }
  // The drafter's logits for each draft of a round: [drafts, vocab] (model drafter only).
  const std::map<int64_t, at::Tensor>& draftLogits() const { return draft_logits_; }
  // The tokens the engine believes a cache holds, in order. A correct engine's
  // cache holds exactly their K/V rows; a fault makes the two disagree, which
  // is what the audit checks.
  const std::vector<int64_t>& believedCacheTokens(CacheRole role) const;
  const KvLedger& ledger() const { return ledger_; }
  const KvCache* targetCache() const { return target_cache_.get(); }
  const KvCache* drafterCache() const { return drafter_cache_.get(); }
  int64_t currentGamma() const { return gamma_; }
  Metrics metrics() const;

 private:
  void runPrefill();
  void runDraft();
  void runVerify();
  void runAccept();
  void runPrune();
  void beginRound();
  void advancePhase();

  // Feeds sequence[cache_length..] (+ extra tokens) to a model, recording
  // births in the ledger. Returns the logits of the fed tokens [n, vocab].
  at::Tensor feed(CacheRole role, const std::vector<int64_t>& tokens_after_cache, Phase phase,
                  ProbeSink* probes = nullptr);
  // Cuts a cache back so the engine believes it holds `keep` entries; the
  // active fault decides what physically happens.
  void pruneCache(CacheRole role, int64_t keep, int64_t first_wrong_position);
  void cropPhysically(CacheRole role, int64_t new_length, bool all_layers, DeathReason reason,
                      int64_t first_wrong_position);
  KvCache* cacheOf(CacheRole role) const;
  c10::optional<c10::ScalarType> cacheStorage() const;
  std::vector<int64_t>& believed(CacheRole role);

  std::shared_ptr<const CausalLM> target_;
  std::shared_ptr<const Drafter> drafter_;
  SessionOptions options_;
  std::vector<int64_t> eos_ids_;
  at::Generator generator_;

  std::vector<int64_t> sequence_;
  std::vector<TokenOrigin> origins_;
  int64_t prompt_length_ = 0;
  std::unique_ptr<KvCache> target_cache_;
  std::unique_ptr<KvCache> drafter_cache_;
  KvLedger ledger_;

  Phase next_phase_ = Phase::Prefill;
  int64_t round_index_ = 0;
  int64_t gamma_ = 0;
  bool finished_ = false;
  std::vector<RoundRecord> rounds_;
  std::map<int64_t, VerifyRecord> verify_records_;
  std::map<int64_t, at::Tensor> draft_logits_;
  std::vector<int64_t> believed_target_;   // tokens the engine thinks each cache holds
  std::vector<int64_t> believed_drafter_;
  int64_t position_shift_target_ = 0;      // stale-rope: positions not rewound after rollbacks
  int64_t position_shift_drafter_ = 0;

  // Working state of the round in progress.
  at::Tensor draft_q_;       // [drafts, vocab] processed drafter distributions
  at::Tensor verify_p_;      // [drafts + 1, vocab] processed target distributions
  at::Tensor verify_logits_; // [drafts + 1, vocab]
  int64_t target_forwards_ = 0;
  int64_t drafter_forwards_ = 0;
};

}  // namespace kvscope
