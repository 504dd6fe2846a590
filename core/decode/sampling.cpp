#include "core/decode/sampling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/model/vector_exp.h"
#include "core/runtime/cpu_features.h"

// GCC 12 reports the intrinsics' own _mm512_undefined_ps() as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvscope {
namespace {

// A row's largest value (NaN when the row holds one: the caller falls back
// to torch's softmax, which propagates it).
__attribute__((target("avx512f"))) float rowMaxAvx512(const float* x, int64_t n) {
  __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_mask_loadu_ps(best, lanes, x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    best = _mm512_max_ps(best, v);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(best);
}

// The first index whose value equals `value` (which the row holds: its
// maximum), 16 lanes at a time; -0 and +0 count as equal, as in argmax.
__attribute__((target("avx512f"))) int64_t firstEqualAvx512(const float* x, int64_t n, float value) {
  const __m512 target = _mm512_set1_ps(value);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(lanes, _mm512_maskz_loadu_ps(lanes, x + i), target, _CMP_EQ_OQ);
    if (hit) return i + __builtin_ctz(hit);
  }
  return 0;  // unreachable: the row holds its maximum
}

// sum of exp(x - max) over the row, 16 lanes of exp at a time, summed in
// float64 (a float32 sum over a 152k vocabulary drifts by a few 1e-6).
__attribute__((target("avx512f"))) double sumOfExpAvx512(const float* x, int64_t n, float max) {
  const __m512 shift = _mm512_set1_ps(max);
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(lanes, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + i), shift)));
    low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    high = _mm512_add_pd(high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

// argmaxOf of a float32 row of n > 0 values read in place.
int64_t argmaxOfFloats(const float* x, int64_t n) {
  if (cpuHasAvx512()) {
    const float max = rowMaxAvx512(x, n);
    if (!std::isnan(max)) return firstEqualAvx512(x, n, max);
  }
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return i;  // torch's argmax: the first NaN is the largest
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace

int64_t argmaxOf(const at::Tensor& scores) {
  if (scores.dim() != 1 || scores.scalar_type() != at::kFloat || !scores.is_contiguous() || scores.numel() == 0) {
    return scores.argmax().item<int64_t>();
  }
  return argmaxOfFloats(scores.data_ptr<float>(), scores.numel());
}

int64_t argmaxOfRow(const at::Tensor& rows, int64_t row) {
  require(rows.dim() == 2 && row >= 0 && row < rows.size(0), [&] {
    return "argmaxOfRow: row " + std::to_string(row) + " of a " + std::to_string(rows.dim()) + "-d tensor of " +
           std::to_string(rows.dim() > 0 ? rows.size(0) : 0) + " rows";
  });
  if (rows.scalar_type() != at::kFloat || !rows.is_contiguous() || rows.size(1) == 0) return argmaxOf(rows[row]);
  return argmaxOfFloats(rows.data_ptr<float>() + row * rows.size(1), rows.size(1));
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

std::vector<double> softmaxOfPicks(const at::Tensor& logits, const std::vector<int64_t>& picks) {
  const auto k = static_cast<int64_t>(picks.size());
  if (k == 0) return {};
  require(logits.dim() == 2 && logits.size(0) >= k, "softmaxOfPicks: expected logits [rows >= picks, vocab]");
  const auto byTorch = [&] { return probabilitiesOfPicks(logits.narrow(0, 0, k).softmax(1), picks); };
  if (!cpuHasAvx512() || logits.scalar_type() != at::kFloat || !logits.is_contiguous() || !logits.device().is_cpu()) {
    return byTorch();
  }
  const int64_t vocab = logits.size(1);
  const float* rows = logits.data_ptr<float>();
  std::vector<double> out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t pick = picks[static_cast<size_t>(i)];
    require(pick >= 0 && pick < vocab,
            [&] { return "softmaxOfPicks: pick " + std::to_string(pick) + " outside the vocabulary"; });
    const float* row = rows + i * vocab;
    const float max = rowMaxAvx512(row, vocab);
    if (!std::isfinite(max)) return byTorch();  // NaN or infinite logits: torch's own rules
    out[static_cast<size_t>(i)] = static_cast<double>(std::exp(row[pick] - max)) / sumOfExpAvx512(row, vocab, max);
  }
  return out;
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
