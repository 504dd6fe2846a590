#include "core/model/cache_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "core/model/query_attention_avx512.h"
#include "core/runtime/cpu_features.h"

namespace kvscope {
namespace {

// One query head against its kv head's rows.
struct HeadTask {
  const float* q;         // row i at q + i * q_stride
  int64_t q_stride;
  const float* k;         // key row j at k + j * kv_stride (values likewise)
  const float* v;
  int64_t k_stride, v_stride;
  const bool* keep;       // [T] (stride keep_stride) or null: every row kept
  int64_t keep_stride;
  float* out;             // row i at out + i * out_stride
  int64_t out_stride;
  int64_t rows, total, head_dim;
  float scale, softcap;
  int64_t window;
  int64_t pad_rows;       // keys [0, pad_rows) hidden from queries at key index >= pad_rows
  bool causal_among_new;
  float* scores;          // [T] scratch
  float* weights;         // row i at weights + i * total ([rows, T]), or null
};

// Keys [first, last] query i may see before the keep mask: causal by row
// index (query i sits at key index T - n + i), the last n rows all visible
// when they do not mask each other, the sliding window's left edge and a
// left-padded sequence's pad rows (attention.cpp's hiddenKeys, as ranges).
std::pair<int64_t, int64_t> visibleRange(const HeadTask& t, int64_t i) {
  const int64_t at = t.total - t.rows + i;
  const int64_t last = t.causal_among_new ? at : t.total - 1;
  int64_t first = t.window > 0 ? std::max<int64_t>(0, at - t.window + 1) : 0;
  if (at >= t.pad_rows) first = std::max(first, t.pad_rows);  // a real query never sees a pad row
  return {first, last};
}

__attribute__((always_inline)) inline float dot(const float* a, const float* b, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// scores[j] for the keys query i sees, -inf for the others; returns the largest.
__attribute__((always_inline)) inline float scoreRow(const HeadTask& t, const float* q, int64_t first, int64_t last) {
  constexpr float kHidden = -std::numeric_limits<float>::infinity();
  float largest = kHidden;
  for (int64_t j = first; j <= last; ++j) {
    if (t.keep != nullptr && !t.keep[j * t.keep_stride]) {
      t.scores[j] = kHidden;
      continue;
    }
    float s = dot(q, t.k + j * t.k_stride, t.head_dim) * t.scale;
    if (t.softcap > 0) s = std::tanh(s / t.softcap) * t.softcap;
    t.scores[j] = s;
    largest = std::max(largest, s);
  }
  return largest;
}

__attribute__((always_inline)) inline void attendHeadBody(const HeadTask& t) {
  for (int64_t i = 0; i < t.rows; ++i) {
    float* out = t.out + i * t.out_stride;
    const auto [first, last] = visibleRange(t, i);
    const float largest = scoreRow(t, t.q + i * t.q_stride, first, last);
    float* weights = t.weights != nullptr ? t.weights + i * t.total : nullptr;
    if (largest == -std::numeric_limits<float>::infinity()) {
      // No key visible: softmax over nothing but -inf is NaN, as the tensor path gives.
      std::fill(out, out + t.head_dim, std::numeric_limits<float>::quiet_NaN());
      if (weights != nullptr) std::fill(weights, weights + t.total, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    float total = 0;
    for (int64_t j = first; j <= last; ++j) {
      const float w = std::exp(t.scores[j] - largest);
      t.scores[j] = w;
      total += w;
    }
    const float inverse = 1.0f / total;  // softmax multiplies by the reciprocal of the sum
    if (weights != nullptr) {
      std::fill(weights, weights + t.total, 0.0f);
      for (int64_t j = first; j <= last; ++j) weights[j] = t.scores[j] * inverse;
    }
    std::fill(out, out + t.head_dim, 0.0f);
    for (int64_t j = first; j <= last; ++j) {
      const float w = t.scores[j] * inverse;  // 0 for a removed row: 0 * V, as the batched product adds it
      const float* v = t.v + j * t.v_stride;
#pragma omp simd
      for (int64_t d = 0; d < t.head_dim; ++d) out[d] += w * v[d];
    }
  }
}

// Every query of kv head `kv` (its group's heads times the rows) by
// attendQueriesAvx512 (core/model/query_attention_avx512.h), each with its
// own row of scores.
void attendKvHeadByQueries(const HeadTask& base, const CacheAttentionRows& rows, const CacheRowsView& cache,
                           int64_t kv, int64_t group, float* scores) {
  thread_local std::vector<QueryAttention> queries;
  queries.clear();
  for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
    for (int64_t i = 0; i < rows.rows; ++i) {
      QueryAttention a;
      a.k = cache.k + kv * cache.k_head_stride;
      a.v = cache.v + kv * cache.v_head_stride;
      a.k_stride = base.k_stride;
      a.v_stride = base.v_stride;
      a.keep = cache.keep != nullptr ? cache.keep + kv * cache.keep_head_stride : nullptr;
      a.keep_stride = base.keep_stride;
      a.head_dim = base.head_dim;
      a.scale = base.scale;
      a.softcap = base.softcap;
      std::tie(a.first, a.last) = visibleRange(base, i);
      a.q = rows.q + i * rows.q_stride + h * rows.head_dim;
      a.out = rows.out + i * rows.out_stride + h * rows.head_dim;
      a.scores = scores + (h * rows.rows + i) * base.total;
      if (rows.weights != nullptr) {
        a.weights = rows.weights + (h * rows.rows + i) * base.total;  // [heads, n, T]
        a.weights_length = base.total;
      }
      queries.push_back(a);
    }
  }
  attendQueriesAvx512(queries.data(), static_cast<int64_t>(queries.size()));
}

__attribute__((target("avx2,fma"))) void attendHeadAvx2(const HeadTask& t) { attendHeadBody(t); }
void attendHeadPortable(const HeadTask& t) { attendHeadBody(t); }

using HeadFunction = void (*)(const HeadTask&);

HeadFunction headFunction() {
  return cpuHasAvx2Fma() ? &attendHeadAvx2 : &attendHeadPortable;
}

// Float32 with unit inner stride: read in place; otherwise a float32 copy
// (a half-precision cache is read in the compute dtype, as keysAndValues does).
at::Tensor readable(const at::Tensor& rows) {
  if (rows.scalar_type() == at::kFloat && rows.stride(2) == 1) return rows;
  return rows.to(at::kFloat).contiguous();
}

// Multiply-adds below which one thread does every head: splitting a decode
// step's attention over a short cache costs more than it saves.
constexpr int64_t kParallelWork = 1 << 18;

}  // namespace

void attendCacheRowsInto(const CacheAttentionRows& rows, const CacheRowsView& cache, const AttentionOptions& options,
                         std::vector<float>& scratch) {
  const int64_t total = cache.total, group = rows.heads / cache.kv_heads;
  const bool by_queries = queryAttentionAvx512Applies(rows.head_dim);
  // A row of scores per query head (and per row when the rows are attended together).
  const int64_t score_rows = rows.heads * (by_queries ? rows.rows : 1);
  if (static_cast<int64_t>(scratch.size()) < score_rows * total) scratch.resize(static_cast<size_t>(score_rows * total));

  HeadTask base{};
  base.q_stride = rows.q_stride;
  base.k_stride = cache.k_row_stride;
  base.v_stride = cache.v_row_stride;
  base.keep_stride = cache.keep_row_stride;
  base.out_stride = rows.out_stride;
  base.rows = rows.rows;
  base.total = total;
  base.head_dim = rows.head_dim;
  base.scale = static_cast<float>(options.scale);
  base.softcap = static_cast<float>(options.softcap);
  base.window = options.window;
  base.pad_rows = options.pad_rows;
  base.causal_among_new = options.causal_among_new;

  const int64_t work = rows.heads * rows.rows * total * rows.head_dim;
  if (by_queries) {
    const int64_t grain = work >= kParallelWork ? 1 : cache.kv_heads;
    at::parallel_for(0, cache.kv_heads, grain, [&](int64_t begin, int64_t end) {
      for (int64_t kv = begin; kv < end; ++kv) attendKvHeadByQueries(base, rows, cache, kv, group, scratch.data());
    });
    return;
  }
  const HeadFunction attend = headFunction();
  const int64_t grain = work >= kParallelWork ? 1 : rows.heads;
  at::parallel_for(0, rows.heads, grain, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kv = h / group;  // grouped-query attention: query head h reads kv head h / group
      HeadTask task = base;
      task.q = rows.q + h * rows.head_dim;
      task.out = rows.out + h * rows.head_dim;
      task.k = cache.k + kv * cache.k_head_stride;
      task.v = cache.v + kv * cache.v_head_stride;
      task.keep = cache.keep != nullptr ? cache.keep + kv * cache.keep_head_stride : nullptr;
      task.scores = scratch.data() + h * total;
      task.weights = rows.weights != nullptr ? rows.weights + h * rows.rows * total : nullptr;  // [heads, n, T]
      attend(task);
    }
  });
}

void attendCacheInto(const CacheAttentionRows& rows, const at::Tensor& keys_in, const at::Tensor& values_in,
                     const AttentionOptions& options, std::vector<float>& scratch) {
  const at::Tensor keys = readable(keys_in), values = readable(values_in);  // [kv, T, D]
  at::Tensor keep;
  if (options.keep.defined()) keep = options.keep.scalar_type() == at::kBool ? options.keep : options.keep.to(at::kBool);
  CacheRowsView view;
  view.k = keys.data_ptr<float>();
  view.v = values.data_ptr<float>();
  view.k_head_stride = keys.stride(0);
  view.k_row_stride = keys.stride(1);
  view.v_head_stride = values.stride(0);
  view.v_row_stride = values.stride(1);
  view.kv_heads = keys.size(0);
  view.total = keys.size(1);
  if (keep.defined()) {
    view.keep = keep.data_ptr<bool>();  // [kv, T]
    view.keep_head_stride = keep.stride(0);
    view.keep_row_stride = keep.stride(1);
  }
  attendCacheRowsInto(rows, view, options, scratch);
}

}  // namespace kvscope
