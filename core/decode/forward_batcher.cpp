#include "core/decode/forward_batcher.h"

#include <algorithm>
#include <thread>

#include <torch/torch.h>

namespace kvscope {
namespace {

// The lane this thread runs (-1: not a lane of any batcher).
thread_local int this_lane = -1;
thread_local const ForwardBatcher* this_batcher = nullptr;

}  // namespace

std::vector<std::exception_ptr> ForwardBatcher::runLanes(const std::vector<std::function<void()>>& lanes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lanes_.assign(lanes.size(), Lane{});
    turn_ = kCoordinator;
  }
  std::vector<std::thread> threads;
  threads.reserve(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i) threads.emplace_back([this, i, &lanes] { laneMain(static_cast<int>(i), lanes[i]); });
  std::unique_lock<std::mutex> lock(mutex_);
  passTurn(lock, nextTurn(kCoordinator));
  while (true) {
    waitForTurn(lock, kCoordinator);
    const bool all_done = std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.state == LaneState::Done; });
    if (all_done) break;
    // Every lane still running waits for a forward: run them, batched.
    lock.unlock();
    runWaitingForwards();
    lock.lock();
    passTurn(lock, nextTurn(kCoordinator));
  }
  lock.unlock();
  for (std::thread& t : threads) t.join();
  std::vector<std::exception_ptr> errors;
  for (const Lane& lane : lanes_) errors.push_back(lane.error);
  return errors;
}

void ForwardBatcher::laneMain(int index, const std::function<void()>& work) {
  this_lane = index;
  this_batcher = this;
  std::unique_lock<std::mutex> lock(mutex_);
  waitForTurn(lock, index);
  lock.unlock();
  std::exception_ptr error;
  try {
    c10::InferenceMode guard;  // as the session's own phases run (thread-local)
    work();
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  lanes_[static_cast<size_t>(index)].state = LaneState::Done;
  lanes_[static_cast<size_t>(index)].error = error;
  passTurn(lock, nextTurn(index));
  this_lane = -1;
  this_batcher = nullptr;
}

at::Tensor ForwardBatcher::run(const CausalLM& model, const SequenceForward& forward) {
  if (this_batcher != this || this_lane < 0) return directForwards().run(model, forward);
  const int me = this_lane;
  std::unique_lock<std::mutex> lock(mutex_);
  Lane& lane = lanes_[static_cast<size_t>(me)];
  lane.state = LaneState::Waiting;
  lane.model = &model;
  lane.request = forward;
  passTurn(lock, nextTurn(me));
  waitForTurn(lock, me);
  CausalLM::SequenceResult result = std::move(lane.result);
  lane.result = {};
  lock.unlock();
  if (result.error) std::rethrow_exception(result.error);
  return result.logits;
}

int ForwardBatcher::nextTurn(int after) const {
  for (size_t i = static_cast<size_t>(after + 1); i < lanes_.size(); ++i) {
    if (lanes_[i].state == LaneState::Ready) return static_cast<int>(i);
  }
  return kCoordinator;  // every lane waits or is done
}

void ForwardBatcher::passTurn(std::unique_lock<std::mutex>&, int to) {
  turn_ = to;
  turn_changed_.notify_all();
}

void ForwardBatcher::waitForTurn(std::unique_lock<std::mutex>& lock, int me) {
  turn_changed_.wait(lock, [&] { return turn_ == me; });
}

void ForwardBatcher::runWaitingForwards() {
  // Only the coordinator runs now; the lanes are all blocked, so their
  // records are read without the lock.
  std::vector<const CausalLM*> models;  // in the order lanes first asked for them
  for (const Lane& lane : lanes_) {
    if (lane.state == LaneState::Waiting && std::find(models.begin(), models.end(), lane.model) == models.end())
      models.push_back(lane.model);
  }
  c10::InferenceMode guard;
  for (const CausalLM* model : models) {
    std::vector<SequenceForward> batch;
    std::vector<size_t> owners;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (lanes_[i].state != LaneState::Waiting || lanes_[i].model != model) continue;
      batch.push_back(*lanes_[i].request);
      owners.push_back(i);
    }
    std::vector<CausalLM::SequenceResult> results;
    try {
      padToWidth(batch);
      results = model->forwardBatch(batch);
    } catch (...) {  // an error of the batch as a whole reaches every lane in it
      results.assign(batch.size(), CausalLM::SequenceResult{at::Tensor(), std::current_exception()});
    }
    for (size_t b = 0; b < owners.size(); ++b) {
      if (batch[b].padding_out != nullptr) *batch[b].padding_out = batch[b].pads;
      Lane& lane = lanes_[owners[b]];
      lane.result = std::move(results[b]);
      lane.request.reset();
      lane.state = LaneState::Ready;
    }
    ++forwards_run_;
    sequences_forwarded_ += static_cast<int64_t>(batch.size());
  }
}

void ForwardBatcher::padToWidth(std::vector<SequenceForward>& batch) const {
  if (!pad_token_) return;
  int64_t width = 0;  // the call's width: its widest sequence's inputs
  for (const SequenceForward& s : batch) {
    if (s.padding_out != nullptr) width = std::max(width, s.tokens.size(0));
  }
  for (SequenceForward& s : batch) {
    const int64_t missing = width - s.tokens.size(0);
    if (s.padding_out == nullptr || missing <= 0) continue;
    const at::Tensor pads = torch::full({missing}, *pad_token_, torch::kInt64);  // [missing]
    // A prompt's prefill (an empty cache fed from position 0) is padded on the
    // left, so the pads become the cache's first rows; later inputs on the
    // right, so the pads sit after every real query and are cut off after.
    const bool prefill = s.start_pos == 0 && s.cache != nullptr && s.cache->length() == 0;
    s.tokens = prefill ? torch::cat({pads, s.tokens}) : torch::cat({s.tokens, pads});  // [width]
    (prefill ? s.pads.before : s.pads.after) = missing;
    s.pads.token = *pad_token_;
  }
}

}  // namespace kvscope
