#include "core/explain/attention_explanation.h"

#include <torch/types.h>

#include "core/explain/attention_steps.h"
#include "core/explain/what_if.h"

namespace kvscope {
namespace {

std::vector<float> floats(const at::Tensor& t) {
  const auto c = t.detach().to(torch::kFloat32).contiguous().reshape({-1});
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

std::vector<uint8_t> flags(const at::Tensor& t) {
  const auto c = t.to(torch::kUInt8).contiguous().reshape({-1});
  return {c.data_ptr<uint8_t>(), c.data_ptr<uint8_t>() + c.numel()};
}

AttentionQuery queryOf(const ExplainRequest& request) { return {request.layer, request.head, request.position}; }

}  // namespace

AttentionExplanation explainAttention(const CausalLM& model, const ExplainRequest& request) {
  const AttentionSteps steps = attentionSteps(model, request.ids, queryOf(request));
  AttentionExplanation out;
  out.request = request;
  out.architecture = model.config().architecture_name;
  out.head_dim = steps.q.size(0);
  out.kv_head = steps.kv_head;
  out.query_heads_sharing = steps.query_heads_sharing;
  out.window = steps.window;
  out.hidden = floats(steps.hidden);
  out.hidden_norm = steps.hidden.norm().item<double>();
  out.q_before_rope = floats(steps.q_before_rope);
  out.rotary = steps.rotary.has_value();
  if (steps.rotary) {
    out.angle = floats(steps.rotary->angle);
    out.rotary_magnitude = steps.rotary->magnitude;
  }
  out.q = floats(steps.q);
  out.keys = floats(steps.keys);
  out.values = floats(steps.values);
  out.scores = floats(steps.scores);
  out.scale = steps.scale;
  out.scaled = floats(steps.scaled);
  out.softcap = steps.softcap;
  out.capped = floats(steps.capped);
  out.visible = flags(steps.visible);
  out.masked = floats(steps.masked);
  out.weights = floats(steps.weights);
  out.output = floats(steps.output);
  out.model_difference = steps.model_difference;
  out.num_heads = model.config().num_heads;
  out.head_contribution = floats(steps.head_contribution);
  out.o_proj_bias = floats(steps.o_proj_bias);
  out.projected = floats(steps.projected);
  out.projection_difference = steps.projection_difference;
  return out;
}

WhatIfExplanation explainWhatIf(const CausalLM& model, const ExplainRequest& request) {
  const CacheEdit edit{request.remove_positions, request.zero_key_channels, request.zero_value_channels,
                       request.zero_positions};
  const WhatIf result = whatIf(model, request.ids, queryOf(request), edit);
  WhatIfExplanation out;
  out.request = request;
  out.removed = flags(result.removed);
  out.weights_before = floats(result.weights_before);
  out.weights_after = floats(result.weights_after);
  out.output_before = floats(result.output_before);
  out.output_after = floats(result.output_after);
  out.kl = result.kl;
  out.top1_before = result.top1_before;
  out.top1_after = result.top1_after;
  out.top1_before_p_before = result.probabilities_before[result.top1_before].item<double>();
  out.top1_before_p_after = result.probabilities_after[result.top1_before].item<double>();
  out.top1_after_p_after = result.probabilities_after[result.top1_after].item<double>();
  out.max_logit_difference = result.max_logit_difference;
  return out;
}

}  // namespace kvscope
