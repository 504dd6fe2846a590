// The multiply-add floor bench prints under each verify forward
// (core/bench/multiply_add_peak.h).
#include <gtest/gtest.h>

#include "core/bench/multiply_add_peak.h"
#include "core/runtime/cpu_features.h"
#include "tests/core/session_test_support.h"

namespace kvscope {
namespace {

// The bundled target (Llama shape, tied head): every layer's seven matrices
// and the head, by the config's own sizes.
TEST(MultiplyAdds, PerRowAreEveryLayerMatrixAndTheTiedHead) {
  const auto model = testing_support::bundledModel("target");
  const ModelConfig& c = model->config();
  ASSERT_TRUE(c.tie_word_embeddings);
  const int64_t attention = c.hidden_size * c.num_heads * c.head_dim * 2 +        // q, o
                            c.hidden_size * c.num_kv_heads * c.head_dim * 2;      // k, v
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;                   // gate, up, down
  const int64_t head = c.vocab_size * c.hidden_size;
  EXPECT_EQ(matrixMultiplyAddsPerRow(*model), c.num_layers * (attention + mlp) + head);
}

// An untied head is a matrix of its own; the embedding is a lookup either way.
TEST(MultiplyAdds, AnUntiedHeadCountsOnceAndTheEmbeddingNot) {
  for (const char* name : {"llama-tiny", "gpt2-tiny", "qwen2-tiny"}) {
    const auto model = testing_support::fixtureModel(name);
    const ModelConfig& c = model->config();
    int64_t matrices = 0;
    for (const auto& [param, tensor] : model->namedParameters()) {
      if (tensor.dim() >= 2) matrices += tensor.numel();  // [out, in], column-major, or panels [P, in, 16]
    }
    // Every 2-D parameter but the lookups (the token embedding, GPT-2's positions).
    int64_t lookups = c.vocab_size * c.hidden_size;
    if (c.arch == Architecture::Gpt2) lookups += c.max_position_embeddings * c.hidden_size;
    const int64_t tied_head = c.tie_word_embeddings ? c.vocab_size * c.hidden_size : 0;
    EXPECT_EQ(matrixMultiplyAddsPerRow(*model), matrices - lookups + tied_head) << name;
  }
}

TEST(MultiplyAddPeak, IsMeasuredWhereTheCpuHasFma) {
  const double peak = multiplyAddPeakPerSecond();
  if (!cpuHasAvx512() && !cpuHasAvx2Fma()) {
    EXPECT_EQ(peak, 0.0);
    return;
  }
  // Any core with 256-bit FMA does billions a second; a wrong count of
  // lanes or iterations would be off by orders of magnitude.
  EXPECT_GT(peak, 1e9);
  EXPECT_LT(peak, 1e12);
}

}  // namespace
}  // namespace kvscope
