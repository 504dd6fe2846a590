#pragma once
// Several sequences decoded together, as a serving engine decodes them: one
// speculative Session per sequence (its own caches, acceptance, rollback,
// faults and books), with every phase's forwards joined into batched
// forwards (core/decode/forward_batcher.h). Each sequence accepts its own
// number of drafts in a round and is rolled back on its own; a round's
// verify is one target forward over every sequence's drafts, each at its own
// positions. Sequences that finish (end of sequence, or max_new_tokens) drop
// out of the batch; the others go on.
//
// With options.batch_layout padded, every joined forward is rectangular:
// prompts left-padded to the longest, narrower inputs padded to the call's
// width, pads masked and dropped (core/decode/forward_batcher.h; each
// sequence's tracked caches keep the pad rows' books).
//
// Sequence i samples with seed options.seed + i, so a sampled batch's rows do
// not repeat each other; greedy rows are the ones each sequence decoded alone
// gives.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/decode/forward_batcher.h"
#include "core/decode/session.h"

namespace kvscope {

class BatchSession {
 public:
  static constexpr int64_t kMaxSequences = SessionLimits::kMaxBatch;

  // prompts: one per sequence (1 .. kMaxSequences). Throws Error naming the
  // sequence for a prompt a Session refuses, and for an empty batch.
  BatchSession(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
               const std::vector<std::vector<int64_t>>& prompts, const SessionOptions& options,
               const std::vector<int64_t>& eos_ids);

  size_t size() const { return sessions_.size(); }
  const Session& sequence(size_t i) const { return *sessions_.at(i); }

  // --- advancing (every unfinished sequence together) ---------------------
  bool finished() const;
  Phase nextPhase() const;
  int64_t currentRound() const;
  // One phase of every unfinished sequence. A sequence whose phase throws
  // stays where it failed; the error is rethrown (as Error naming the
  // sequence) once every sequence has run its phase.
  void stepPhase();
  void stepRound();
  void runToEnd(const std::atomic<bool>* cancel = nullptr);

  // Batched forwards so far, and the sequences they held in all.
  int64_t batchedForwards() const { return batcher_.batchedForwards(); }
  int64_t sequencesForwarded() const { return batcher_.sequencesForwarded(); }

 private:
  // The unfinished sequence that leads (the phase every unfinished one is at).
  const Session* leader() const;
  // Before the prune phase: tells every sequence about to prune the most
  // drafts any of them accepted this round (a batched engine's rollback
  // knows the whole batch's acceptance).
  void noteBatchAcceptance();

  ForwardBatcher batcher_;
  std::vector<std::unique_ptr<Session>> sessions_;
};

}  // namespace kvscope
