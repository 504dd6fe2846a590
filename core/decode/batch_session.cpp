#include "core/decode/batch_session.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace kvscope {

BatchSession::BatchSession(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Drafter> drafter,
                           const std::vector<std::vector<int64_t>>& prompts, const SessionOptions& options,
                           const std::vector<int64_t>& eos_ids) {
  require(!prompts.empty(), "batch: no prompts (give at least one)");
  require(static_cast<int64_t>(prompts.size()) <= kMaxSequences,
          "batch: " + std::to_string(prompts.size()) + " prompts; at most " + std::to_string(kMaxSequences) +
              " sequences are decoded together");
  // With the paged layout every sequence allocates from the batch's pools,
  // one per model (the target's, the drafter's), as a serving engine's do.
  std::shared_ptr<BlockPool> target_pool, drafter_pool;
  if (options.cache_layout.paged && options.use_cache) {
    const int64_t block = options.cache_layout.block_size;
    target_pool = target->makeBlockPool(block, cacheStorageOf(options));
    if (const CausalLM* draft_model = drafter ? drafter->model() : nullptr) {
      drafter_pool = draft_model->makeBlockPool(block, cacheStorageOf(options));
    }
  }
  // kvscope reads no pad_token_id: pads are the first eos id, as Hugging
  // Face generate falls back to eos_token_id when no pad token is set.
  if (options.batch_layout == BatchLayout::Padded) batcher_.padWith(eos_ids.empty() ? 0 : eos_ids.front());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionOptions row_options = options;
    row_options.seed = options.seed + i;  // rows sample apart; greedy rows are unaffected
    try {
      const BatchPlace place{static_cast<int64_t>(i), static_cast<int64_t>(prompts.size()), target_pool, drafter_pool};
      sessions_.push_back(std::make_unique<Session>(target, drafter, prompts[i], row_options, eos_ids, &batcher_, place));
    } catch (const Error& e) {
      throw Error("sequence " + std::to_string(i) + ": " + e.what());
    }
  }
}

bool BatchSession::finished() const { return leader() == nullptr; }

const Session* BatchSession::leader() const {
  for (const auto& s : sessions_) {
    if (!s->finished()) return s.get();
  }
  return nullptr;
}

Phase BatchSession::nextPhase() const {
  const Session* s = leader();
  return s ? s->nextPhase() : sessions_.front()->nextPhase();
}

int64_t BatchSession::currentRound() const {
  const Session* s = leader();
  return s ? s->currentRound() : sessions_.front()->currentRound();
}

void BatchSession::stepPhase() {
  std::vector<std::function<void()>> lanes;
  std::vector<size_t> stepped;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i]->finished()) continue;
    Session* session = sessions_[i].get();
    lanes.emplace_back([session] { session->stepPhase(); });
    stepped.push_back(i);
  }
  if (lanes.empty()) return;
  if (nextPhase() == Phase::Prune) noteBatchAcceptance();
  const std::vector<std::exception_ptr> errors = batcher_.runLanes(lanes);
  for (size_t k = 0; k < errors.size(); ++k) {
    if (!errors[k]) continue;
    try {
      std::rethrow_exception(errors[k]);
    } catch (const std::exception& e) {
      throw Error("sequence " + std::to_string(stepped[k]) + ": " + e.what());
    }
  }
}

void BatchSession::noteBatchAcceptance() {
  int64_t most = 0;
  for (const auto& s : sessions_) {
    if (!s->finished() && s->nextPhase() == Phase::Prune) most = std::max(most, s->rounds().back().accepted);
  }
  for (const auto& s : sessions_) {
    if (!s->finished() && s->nextPhase() == Phase::Prune) s->noteBatchAcceptance(most);
  }
}

void BatchSession::stepRound() {
  if (finished()) return;
  const int64_t round = currentRound();
  while (!finished() && currentRound() == round) stepPhase();
}

void BatchSession::runToEnd(const std::atomic<bool>* cancel) {
  while (!finished() && !(cancel && cancel->load())) stepPhase();
}

}  // namespace kvscope
