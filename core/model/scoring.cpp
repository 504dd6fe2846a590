#include "core/model/scoring.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {

FeedMode parseFeedMode(const std::string& name) {
  if (name == "nocache") return FeedMode::NoCache;
  if (name == "cached") return FeedMode::Cached;
  if (name == "prefill_then_step") return FeedMode::PrefillThenStep;
  throw Error("unknown mode '" + name + "' (expected nocache, cached or prefill_then_step)");
}

const char* feedModeName(FeedMode mode) {
  switch (mode) {
    case FeedMode::NoCache: return "nocache";
    case FeedMode::Cached: return "cached";
    case FeedMode::PrefillThenStep: return "prefill_then_step";
  }
  return "?";
}

at::Tensor idsTensor(const std::vector<int64_t>& ids) {
  // One allocation and a copy: torch::tensor(vector) goes through its
  // initializer-list machinery, a few microseconds a drafter step pays.
  auto t = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);  // [n]
  std::copy(ids.begin(), ids.end(), t.data_ptr<int64_t>());
  return t;
}

at::Tensor sequenceLogits(const CausalLM& model, const std::vector<int64_t>& ids, FeedMode mode) {
  require(!ids.empty(), "no token ids given");
  c10::InferenceMode guard;
  const auto tokens = idsTensor(ids);  // [L]
  const int64_t L = tokens.size(0);
  if (mode == FeedMode::NoCache) return model.forward(tokens, 0, nullptr).to(torch::kFloat32);

  auto cache = model.makeCache();
  std::vector<at::Tensor> rows;
  if (mode == FeedMode::Cached) {
    for (int64_t i = 0; i < L; ++i) rows.push_back(model.forward(tokens.narrow(0, i, 1), i, cache.get()));
  } else {
    if (L > 1) rows.push_back(model.forward(tokens.narrow(0, 0, L - 1), 0, cache.get()));
    rows.push_back(model.forward(tokens.narrow(0, L - 1, 1), L - 1, cache.get()));
  }
  return torch::cat(rows, 0).to(torch::kFloat32);  // [L, vocab]
}

double klDivergence(const at::Tensor& log_p, const at::Tensor& log_q) {
  return (log_p.exp() * (log_p - log_q)).sum().item<double>();
}

}  // namespace kvscope
