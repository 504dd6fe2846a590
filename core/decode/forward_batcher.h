#pragma once
// Joins the forwards of several sequences into batched forwards.
//
// Each sequence of a batch is decoded by its own Session, the code every
// single-sequence run uses, so its acceptance, rollback, faults and books are
// the ones a sequence decoded alone has. runLanes runs one piece of work per
// sequence (a lane: "step this sequence's session one phase") on its own
// thread, but never two at once: lanes take turns in index order, and a lane
// that asks for a forward (run()) waits there and passes the turn on. When
// every lane still running is waiting, the batcher runs their forwards as one
// CausalLM::forwardBatch per model (the target's first), hands each lane its
// logits, and the lanes go on in index order. So a verify phase of 8
// sequences is one target forward over 8 sequences' rows, a draft phase of
// gamma steps is gamma drafter forwards of 8 sequences each, and everything
// happens in an order fixed by the lanes' indices alone: runs are repeatable,
// and no two threads touch tensors at the same time.
//
// Padded (padWith): each joined forward is made rectangular, as a [B, T]
// engine's is. Its width is its widest sequence's inputs; a narrower one
// (among the forwards that accept padding, SequenceForward::padding_out)
// gets pad tokens: before its inputs when it feeds an empty cache from
// position 0 (a prompt left-padded to the longest, as Hugging Face generate
// with padding_side="left" does; the rows stay as the cache's pad rows),
// after them otherwise (one draft token where another sequence feeds two;
// the rows are dropped right after the forward). The forward's owner reads
// what was added from padding_out (core/cache/tracked_cache.h keeps the books).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "core/model/causal_lm.h"
#include "core/model/forward_runner.h"

namespace kvscope {

class ForwardBatcher : public ForwardRunner {
 public:
  // Runs lanes[i]() for every i, as described above, and returns when all
  // have returned. A lane that throws ends there; the others go on; the
  // returned errors are per lane (null for a lane that returned).
  std::vector<std::exception_ptr> runLanes(const std::vector<std::function<void()>>& lanes);

  // From inside a lane: waits for the batch this forward joins and returns
  // its logits (or rethrows its error). From any other thread: runs it at once.
  at::Tensor run(const CausalLM& model, const SequenceForward& forward) override;

  // Makes every later joined forward rectangular, padding with `pad_token`.
  void padWith(int64_t pad_token) { pad_token_ = pad_token; }

  // Batched forwards run so far, and the sequences they held in all (for
  // tests and the benchmark: 8 lanes decoding together give about 8 times as
  // many sequences as forwards).
  int64_t batchedForwards() const { return forwards_run_; }
  int64_t sequencesForwarded() const { return sequences_forwarded_; }

 private:
  static constexpr int kCoordinator = -1;
  enum class LaneState { Ready, Waiting, Done };
  struct Lane {
    LaneState state = LaneState::Ready;
    const CausalLM* model = nullptr;
    std::optional<SequenceForward> request;
    CausalLM::SequenceResult result;
    std::exception_ptr error;
  };

  void laneMain(int index, const std::function<void()>& work);
  // With the mutex held: the next lane after `after` that can run, or the coordinator.
  int nextTurn(int after) const;
  void passTurn(std::unique_lock<std::mutex>& lock, int to);
  void waitForTurn(std::unique_lock<std::mutex>& lock, int me);
  // The coordinator's part: every waiting lane's forward, batched per model.
  void runWaitingForwards();
  // With padWith: evens the forwards that accept padding to the widest one's inputs.
  void padToWidth(std::vector<SequenceForward>& batch) const;

  std::mutex mutex_;
  std::condition_variable turn_changed_;
  int turn_ = kCoordinator;
  std::vector<Lane> lanes_;
  int64_t forwards_run_ = 0;
  int64_t sequences_forwarded_ = 0;
  std::optional<int64_t> pad_token_;
};

}  // namespace kvscope
