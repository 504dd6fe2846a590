#pragma once
// A plain copy of one query's attention steps (attention_steps.h) and of a
// "what if" edit (what_if.h) for front ends: std::vector<float> instead of
// tensors, so the GUI reads them without libtorch headers and they can cross
// threads by value. The numbers are the core's; nothing is recomputed here.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

class CausalLM;

// Which query to explain, over which tokens, and (optionally) which edit of
// layer L's cache to try. `ids` are the tokens of positions 0..P.
struct ExplainRequest {
  std::vector<int64_t> ids;
  int64_t layer = 0;
  int64_t head = 0;  // query head
  int64_t position = 0;
  // The "what if" edit (what_if.h CacheEdit); all empty: no edit.
  std::vector<int64_t> remove_positions;
  std::vector<int64_t> zero_key_channels;
  std::vector<int64_t> zero_value_channels;
  std::vector<int64_t> zero_positions;

  bool sameQuery(const ExplainRequest& o) const {
    return ids == o.ids && layer == o.layer && head == o.head && position == o.position;
  }
  bool hasEdit() const {
    return !remove_positions.empty() || !zero_key_channels.empty() || !zero_value_channels.empty();
  }
};

struct AttentionExplanation {
  ExplainRequest request;
  std::string architecture;
  int64_t head_dim = 0;
  int64_t kv_head = 0;
  std::vector<int64_t> query_heads_sharing;
  int64_t window = 0;  // sliding window; 0: none

  std::vector<float> hidden;         // [hidden] entering the layer, after its norm
  double hidden_norm = 0;
  std::vector<float> q_before_rope;  // [head_dim]
  bool rotary = false;               // false: no rotary embedding (GPT-2)
  std::vector<float> angle;          // [head_dim / 2] radians at P, per channel pair (i, i + head_dim / 2)
  double rotary_magnitude = 1.0;
  std::vector<float> q;              // [head_dim] after RoPE
  std::vector<float> keys;           // [P + 1, head_dim] row-major, after RoPE
  std::vector<float> values;         // [P + 1, head_dim]
  std::vector<float> scores;         // [P + 1] q . k_j
  double scale = 1.0;
  std::vector<float> scaled;         // [P + 1]
  double softcap = 0;                // 0: none
  std::vector<float> capped;         // [P + 1]
  std::vector<uint8_t> visible;      // [P + 1] 1: the mask let the query see key j
  std::vector<float> masked;         // [P + 1] -inf where hidden
  std::vector<float> weights;        // [P + 1] softmax
  std::vector<float> output;         // [head_dim] weights . values, before o_proj
  double model_difference = 0;       // against the forward's own weights and output
  // Through o_proj (attention_steps.h): this head's share, the bias, the
  // layer's whole attention output after o_proj, and its check.
  int64_t num_heads = 0;
  std::vector<float> head_contribution;  // [hidden] o_proj's slice for this head . output (no bias)
  std::vector<float> o_proj_bias;        // [hidden] zeros when the layer has none
  std::vector<float> projected;          // [hidden] all heads + bias, the forward's own
  double projection_difference = 0;      // against the forward after o_proj

  int64_t keyCount() const { return static_cast<int64_t>(weights.size()); }
};

struct WhatIfExplanation {
  ExplainRequest request;
  std::vector<uint8_t> removed;  // [P + 1] 1: row removed
  std::vector<float> weights_before, weights_after;  // [P + 1]
  std::vector<float> output_before, output_after;    // [head_dim]
  double kl = 0;                                      // KL(p_before || p_after), nats
  int64_t top1_before = 0, top1_after = 0;
  double top1_before_p_before = 0, top1_before_p_after = 0;  // p of the old top-1, before and after
  double top1_after_p_after = 0;
  double max_logit_difference = 0;
};

// Both run one or two small forwards of `model` (under InferenceMode) and
// throw Error for a bad query or edit, naming it and its valid range.
AttentionExplanation explainAttention(const CausalLM& model, const ExplainRequest& request);
WhatIfExplanation explainWhatIf(const CausalLM& model, const ExplainRequest& request);

}  // namespace kvscope
