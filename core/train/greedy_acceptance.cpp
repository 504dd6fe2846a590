#include "core/train/greedy_acceptance.h"

#include "core/error.h"

namespace kvscope {
namespace {

at::Tensor idTensor(const std::vector<int64_t>& ids) {
  return torch::tensor(at::ArrayRef<int64_t>(ids), torch::kInt64);
}

void checkRequest(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t extra, const char* role) {
  require(!prompt.empty(), "acceptance: empty prompt");
  require(static_cast<int64_t>(prompt.size()) + extra <= model.config().contextLength(),
          std::string("acceptance: prompt plus new tokens exceed the ") + role + "'s context length");
}

}  // namespace

std::vector<int64_t> greedyContinuation(const CausalLM& model, const std::vector<int64_t>& prompt, int64_t max_new) {
  checkRequest(model, prompt, max_new, "model");
  torch::InferenceMode guard;
  auto cache = model.makeCache();
  std::vector<int64_t> out;
  at::Tensor logits = model.forward(idTensor(prompt), 0, cache.get());
  int64_t position = static_cast<int64_t>(prompt.size());
  for (int64_t i = 0; i < max_new; ++i) {
    const int64_t next = logits[-1].argmax().item<int64_t>();
    out.push_back(next);
    if (i + 1 == max_new) break;
    logits = model.forward(idTensor({next}), position++, cache.get());
  }
  return out;
}

AcceptanceStats greedyAcceptance(const CausalLM& target, const CausalLM& drafter, const std::vector<int64_t>& prompt,
                                 int64_t gamma, int64_t max_new) {
  require(gamma > 0 && max_new > 0, "acceptance: gamma and max_new must be positive");
  require(target.config().vocab_size == drafter.config().vocab_size,
          "acceptance: the target and the drafter have different vocabulary sizes");
  checkRequest(target, prompt, max_new + gamma + 1, "target");
  checkRequest(drafter, prompt, max_new + gamma + 1, "drafter");
  // Greedy speculative output is the target's greedy output: compute it once.
  const std::vector<int64_t> truth = greedyContinuation(target, prompt, max_new + gamma + 1);

  torch::InferenceMode guard;
  AcceptanceStats stats;
  int64_t done = 0;  // target tokens emitted so far
  while (done < max_new) {
    std::vector<int64_t> sequence = prompt;
    sequence.insert(sequence.end(), truth.begin(), truth.begin() + done);
    auto cache = drafter.makeCache();
    at::Tensor logits = drafter.forward(idTensor(sequence), 0, cache.get());
    int64_t n = 0;
    bool matching = true;
    for (int64_t i = 0; i < gamma; ++i) {
      const int64_t draft = logits[-1].argmax().item<int64_t>();
      matching = matching && draft == truth[done + i];
      if (matching) ++n;
      if (i + 1 < gamma) logits = drafter.forward(idTensor({draft}), cache->length(), cache.get());
    }
    ++stats.rounds;
    stats.drafted += gamma;
    stats.accepted += n;
    done += n + 1;
  }
  return stats;
}

}  // namespace kvscope
