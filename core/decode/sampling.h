#pragma once
// Turning logits into a next-token distribution and drawing from it.
// The same processing (temperature, then top-k, then top-p, as Hugging Face
// applies its warpers) is used for the target's p and the drafter's q, so
// speculative sampling stays exact.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "core/decode/sampling_settings.h"

namespace kvscope {

// logits: [vocab] -> probabilities [vocab] (float32) after temperature,
// top-k and top-p. Greedy settings give a one-hot at the argmax (ties: the
// lowest id, as torch.argmax).
at::Tensor processedProbs(const at::Tensor& logits, const SamplingSettings& settings);
// The same for every row of logits [rows, vocab] -> [rows, vocab]: a sampled
// verify pass's rows. Greedy settings build all the one-hot rows in three
// tensor operations (processedProbs' greedy row comes from here).
at::Tensor processedProbRows(const at::Tensor& logits, const SamplingSettings& settings);

// Row i's probability of token picks[i]: distributions [k, vocab] -> k values
// (one read for all rows).
std::vector<double> probabilitiesOfPicks(const at::Tensor& distributions, const std::vector<int64_t>& picks);

// Row i's probability of token picks[i] under the softmax of logits [k, vocab]:
// what probabilitiesOfPicks(logits.softmax(1), picks) gives, within float32
// rounding (the sums run in another order). A float32 matrix is read in one
// pass per row with 16-lane exp where the CPU has AVX-512: the softmax of
// every row cost a greedy drafter a fifth of its step.
std::vector<double> softmaxOfPicks(const at::Tensor& logits, const std::vector<int64_t>& picks);

// Draws one id from probs [vocab] with the generator.
int64_t sampleFrom(const at::Tensor& probs, at::Generator& generator);

// The index of the largest of `scores` ([vocab]), the first of equals, as
// torch's argmax gives it (NaN counting as the largest). A float32 row is
// read directly (16 lanes at a time where the CPU has AVX-512): the ATen call
// cost a drafter step of the bundled pair more than its attention.
int64_t argmaxOf(const at::Tensor& scores);
// argmaxOf(rows[row]) of a [rows, vocab] matrix, a float32 one read in place
// (no view made: a greedy verify reads its rows' choices one by one).
int64_t argmaxOfRow(const at::Tensor& rows, int64_t row);

// A uniform draw in [0, 1) from the generator.
double uniform(at::Generator& generator);

at::Generator makeGenerator(uint64_t seed);

}  // namespace kvscope
