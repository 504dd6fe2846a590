#pragma once
// The KV compression lab: a policy applied to the model's real cache and
// measured against a full-cache shadow run on the same tokens.
//
// The prompt minus its last token is prefilled into two caches (the full one
// records the attention and queries the policies score with); the policy
// compresses one of them (rows removed per kv head, entries zeroed); then
// both are fed the same tokens one at a time: the last prompt token, then the
// continuation (teacher-forced), or, without one, `max_new` greedy tokens of
// the full cache. Every step compares the two next-token distributions, the
// attention mass the kept rows held in the full cache's attention, and the
// attention outputs per layer and head.
//
// Both caches are tracked caches (core/cache/tracked_cache.h), as a
// self-speculating session's are: every write, the prefill's compression and
// every per-step eviction (tova) goes through them and is logged in one cache
// event log, which the result keeps (CompressionResult::events); the
// removals are also listed in the result (layer, kv head, position, score, step).
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/cache_event_log.h"
#include "core/compress/prefill_compression.h"

namespace kvscope {

struct CompressionInput {
  std::vector<int64_t> prompt;        // at least 2 tokens
  std::vector<int64_t> continuation;  // teacher-forced; empty: max_new greedy steps
  int64_t max_new = 16;               // without a continuation; 0: compress only
  // Copy the compressed cache's K and V and the element-pruning masks into
  // the result (CompressionResult::keys ...) for views that draw them. Off
  // by default: a sweep keeps dozens of results.
  bool record_cache = false;
};

struct CompressionStep {
  int64_t position = 0;       // of the token fed to both caches
  int64_t token = 0;
  int64_t next = -1;          // the token that follows (scored for perplexity); -1: none
  double kl = 0;              // KL(p_full || p_compressed), nats
  int64_t top1_full = 0;
  int64_t top1_compressed = 0;
  double attention_mass = 1;  // full-cache attention on the rows the compressed cache kept, mean over layers and heads
};

struct CompressionResult {
  int64_t prefill_rows = 0;                             // rows per layer when compressed
  std::vector<int64_t> layer_budgets;                   // rows kept per kv head, per layer (eviction)
  std::vector<std::vector<std::vector<int64_t>>> kept;  // [layer][kv head] positions kept after the prefill compression
  std::vector<RemovedRow> removed;
  std::vector<at::Tensor> scores;  // per layer [kv heads, prefill_rows]: the eviction policy's score of every row
  int64_t demoted = 0;          // rows kept as low-precision copies instead of evicted (per kv head, summed)
  double demote_max_error = 0;  // max |x - q(x)| over the demoted K and V entries
  int64_t pruned_k = 0;  // K entries zeroed by element pruning
  int64_t pruned_v = 0;
  std::vector<CompressionStep> steps;
  at::Tensor output_error;  // [layers, heads] mean over steps of |o_comp - o_full| / |o_full| (attention outputs)
  double kl_mean = 0;
  double kl_max = 0;
  double top1_agreement = 1;
  double attention_mass = 1;
  double perplexity_full = 0;  // over the steps with a known next token; 0 when none
  double perplexity_compressed = 0;
  // K and V bytes after the prefill compression: all rows, and what a
  // compacting cache keeps (kept rows, minus zeroed entries; sparse indices
  // not counted; demoted rows at their bit width plus a float32 scale).
  int64_t bytes_full = 0;
  int64_t bytes_kept = 0;
  // With CompressionInput::record_cache: the compressed cache right after the
  // prefill compression, before any decode step (otherwise empty).
  std::vector<at::Tensor> keys;    // per layer [kv_heads, prefill_rows, head_dim] as stored: zeroed entries 0, evicted rows still there
  std::vector<at::Tensor> values;  // per layer [kv_heads, prefill_rows, head_dim]
  std::vector<at::Tensor> k_keep;  // per layer [kv_heads, prefill_rows, head_dim] bool: entries element pruning left; empty without pruning
  std::vector<at::Tensor> v_keep;  // per layer [kv_heads, prefill_rows, head_dim] bool
  // What happened to both caches, as a session logs it: the full cache is
  // the target's, the compressed one the drafting copy's (CacheRole::Drafter).
  // Round 0 is the prefill (both writes, then the compression's Evict event);
  // step i is round i + 1 (the compressed cache's write at Draft, the full
  // one's at Verify, a per-step eviction at Prune).
  CacheEventLog events;
};

// Runs the lab under InferenceMode. Throws Error for a prompt shorter than 2
// tokens, bad settings, or eviction on a model with sliding-window layers
// (not supported yet: their cache already drops rows from the front).
CompressionResult runCompressionLab(const CausalLM& model, const CompressionInput& input,
                                    const CompressionSpec& spec);

}  // namespace kvscope
