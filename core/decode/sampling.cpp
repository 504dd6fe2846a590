#include "core/decode/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace kvscope {

int64_t argmaxOf(const at::Tensor& scores) {
  if (scores.dim() != 1 || scores.scalar_type() != at::kFloat || !scores.is_contiguous() || scores.numel() == 0) {
    return scores.argmax().item<int64_t>();
  }
  const float* x = scores.data_ptr<float>();
  int64_t best = 0;
  for (int64_t i = 0; i < scores.numel(); ++i) {
    if (std::isnan(x[i])) return i;  // torch's argmax: the first NaN is the largest
    if (x[i] > x[best]) best = i;
  }
  return best;
}

at::Tensor processedProbRows(const at::Tensor& logits, const SamplingSettings& s) {
  if (s.greedy) {  // one-hot rows at each row's argmax
    return at::zeros(logits.sizes(), logits.options().dtype(torch::kFloat32)).scatter_(1, logits.argmax(1, true), 1.0);
  }
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < logits.size(0); ++i) rows.push_back(processedProbs(logits[i], s));
  return torch::stack(rows);  // [rows, vocab]
}

at::Tensor processedProbs(const at::Tensor& logits, const SamplingSettings& s) {
  if (s.greedy) return processedProbRows(logits.unsqueeze(0), s).squeeze(0);  // one-hot [vocab]
  auto scores = logits.to(torch::kFloat32);  // [vocab]
  scores = scores / s.temperature;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (s.top_k > 0 && s.top_k < scores.size(0)) {
    // Keep the k highest scores (and anything tied with the k-th, as HF does).
    auto kth = std::get<0>(scores.topk(s.top_k)).min();
    scores = scores.masked_fill(scores < kth, minus_inf);
  }
  if (s.top_p < 1.0) {
    // HF TopPLogitsWarper: sort ascending, drop the tokens whose cumulative
    // probability stays <= 1 - top_p; always keep the most likely one.
    auto [sorted, order] = scores.sort(/*dim=*/0, /*descending=*/false);
    auto cumulative = sorted.softmax(0).cumsum(0);
    auto remove_sorted = cumulative <= (1.0 - s.top_p);
    remove_sorted[-1] = false;
    auto remove = torch::zeros_like(remove_sorted).scatter(0, order, remove_sorted);
    scores = scores.masked_fill(remove, minus_inf);
  }
  return scores.softmax(0);
}

std::vector<double> probabilitiesOfPicks(const at::Tensor& distributions, const std::vector<int64_t>& picks) {
  const auto k = static_cast<int64_t>(picks.size());
  if (k == 0) return {};
  const auto picked = distributions.gather(1, torch::tensor(picks, torch::kInt64).unsqueeze(1))  // [k, 1]
                          .squeeze(1)
                          .to(torch::kFloat64)
                          .contiguous();  // [k]
  return {picked.data_ptr<double>(), picked.data_ptr<double>() + k};
}

int64_t sampleFrom(const at::Tensor& probs, at::Generator& generator) {
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

double uniform(at::Generator& generator) {
  return torch::rand({1}, generator, torch::kFloat64).item<double>();
}

at::Generator makeGenerator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace kvscope
