// The lean forward's attention over a cache (core/model/cache_attention.h,
// with core/model/query_attention_avx512.h where the CPU has AVX-512):
// against a float64 softmax(q k^T) v for every head_dim the families use,
// with a keep mask, a soft-cap and a sliding window; and a query row gives
// bit for bit the same output whether it is a decode step's only row or one
// row of a verify pass, which is what lets speculative greedy output equal
// the target's own.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "core/model/cache_attention.h"
#include "core/model/query_attention_avx512.h"

namespace kvscope {
namespace {

struct Case {
  int64_t heads, kv_heads, head_dim, rows, total;
};

// q [rows, heads * head_dim] (row-major, the merged layout), keys/values [kv, T, D].
struct Inputs {
  at::Tensor q, keys, values, keep;
};

Inputs randomInputs(const Case& c, uint64_t seed, bool with_keep) {
  torch::manual_seed(seed);
  Inputs in;
  in.q = torch::randn({c.rows, c.heads * c.head_dim}) * 2;  // scores of several units: a peaked softmax
  in.keys = torch::randn({c.kv_heads, c.total, c.head_dim});
  in.values = torch::randn({c.kv_heads, c.total, c.head_dim});
  if (with_keep) {
    in.keep = torch::rand({c.kv_heads, c.total}) > 0.3;
    in.keep.narrow(1, c.total - c.rows, c.rows).fill_(true);  // the new rows are always kept
  }
  return in;
}

at::Tensor attendLean(const Case& c, const Inputs& in, AttentionOptions options) {
  options.keep = in.keep;
  auto out = torch::full({c.rows, c.heads * c.head_dim}, -7.0f);
  CacheAttentionRows rows;
  rows.q = in.q.data_ptr<float>();
  rows.q_stride = c.heads * c.head_dim;
  rows.out = out.data_ptr<float>();
  rows.out_stride = c.heads * c.head_dim;
  rows.rows = c.rows;
  rows.heads = c.heads;
  rows.head_dim = c.head_dim;
  std::vector<float> scratch;
  attendCacheInto(rows, in.keys, in.values, options, scratch);
  return out;
}

// float64, written out from the definition: query i sits at key T - n + i.
at::Tensor attendReference(const Case& c, const Inputs& in, const AttentionOptions& options) {
  const auto q = in.q.to(torch::kFloat64).view({c.rows, c.heads, c.head_dim});
  const auto k = in.keys.to(torch::kFloat64), v = in.values.to(torch::kFloat64);
  auto out = torch::zeros({c.rows, c.heads, c.head_dim}, torch::kFloat64);
  const int64_t group = c.heads / c.kv_heads;
  for (int64_t i = 0; i < c.rows; ++i) {
    const int64_t at = c.total - c.rows + i;
    for (int64_t h = 0; h < c.heads; ++h) {
      auto s = torch::matmul(k[h / group], q[i][h]) * options.scale;  // [T]
      if (options.softcap > 0) s = torch::tanh(s / options.softcap) * options.softcap;
      auto hidden = torch::arange(c.total) > at;
      if (options.window > 0) hidden = hidden | (torch::arange(c.total) < at - options.window + 1);
      if (in.keep.defined()) hidden = hidden | ~in.keep[h / group];
      s = s.masked_fill(hidden, -INFINITY);
      out[i][h] = torch::matmul(torch::softmax(s, 0), v[h / group]);
    }
  }
  return out.view({c.rows, c.heads * c.head_dim}).to(torch::kFloat32);
}

double relativeDifference(const at::Tensor& actual, const at::Tensor& expected) {
  return (actual - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

TEST(QueryAttention, MatchesAFloat64SoftmaxForEveryHeadDim) {
  for (int64_t head_dim : {16, 32, 48, 64, 80, 96, 128, 256, 40}) {  // 40: not a multiple of 16, the plain loop
    for (const Case& c : {Case{8, 2, head_dim, 5, 37}, Case{4, 4, head_dim, 1, 200}, Case{2, 1, head_dim, 16, 16}}) {
      for (bool keep : {false, true}) {
        AttentionOptions options;
        options.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
        const Inputs in = randomInputs(c, 7 + head_dim, keep);
        const auto lean = attendLean(c, in, options);
        EXPECT_LE(relativeDifference(lean, attendReference(c, in, options)), 2e-6)
            << "head_dim " << head_dim << ", rows " << c.rows << ", keys " << c.total << ", keep " << keep;
      }
    }
  }
}

TEST(QueryAttention, SoftCapAndSlidingWindow) {
  const Case c{8, 2, 32, 5, 70};
  for (int64_t window : {0, 4, 33}) {
    AttentionOptions options;
    options.scale = 0.25;
    options.softcap = 2.5;  // low, so it bends every score
    options.window = window;
    const Inputs in = randomInputs(c, 11, /*with_keep=*/false);
    EXPECT_LE(relativeDifference(attendLean(c, in, options), attendReference(c, in, options)), 2e-6)
        << "window " << window;
  }
}

TEST(QueryAttention, AVerifyRowEqualsADecodeStepAtItsPosition) {
  // Query i of a 5-row verify over T keys sees keys 0 .. T - 5 + i: the same
  // inputs as a one-row forward over those keys alone.
  for (int64_t head_dim : {32, 64, 128}) {
    const Case verify{8, 2, head_dim, 5, 61};
    AttentionOptions options;
    options.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const Inputs in = randomInputs(verify, 3, /*with_keep=*/false);
    const auto together = attendLean(verify, in, options);
    for (int64_t i = 0; i < verify.rows; ++i) {
      const Case step{8, 2, head_dim, 1, verify.total - verify.rows + i + 1};
      Inputs alone;
      alone.q = in.q.narrow(0, i, 1).contiguous();
      alone.keys = in.keys.narrow(1, 0, step.total);
      alone.values = in.values.narrow(1, 0, step.total);
      EXPECT_TRUE(torch::equal(attendLean(step, alone, options), together.narrow(0, i, 1)))
          << "head_dim " << head_dim << ", row " << i;
    }
  }
}

TEST(QueryAttention, NoVisibleKeyGivesNaNAsTheTensorPathDoes) {
  const Case c{2, 1, 32, 1, 8};
  Inputs in = randomInputs(c, 5, /*with_keep=*/false);
  in.keep = torch::zeros({1, 8}, torch::kBool);
  AttentionOptions options;
  options.scale = 0.2;
  EXPECT_TRUE(torch::isnan(attendLean(c, in, options)).all().item<bool>());
}

TEST(QueryAttention, TheAvx512PathTakesTheHeadDimsItClaims) {
  if (!queryAttentionAvx512Applies(32)) GTEST_SKIP() << "this CPU has no AVX-512: the plain loop runs everywhere";
  for (int64_t d = 16; d <= 256; d += 16) EXPECT_TRUE(queryAttentionAvx512Applies(d)) << d;
  EXPECT_FALSE(queryAttentionAvx512Applies(40));
  EXPECT_FALSE(queryAttentionAvx512Applies(272));
}

}  // namespace
}  // namespace kvscope
