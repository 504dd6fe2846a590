#include "core/explain/attention_steps.h"

#include "core/model/dense.h"

#include <torch/types.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/model/attention.h"
#include "core/model/probe_recorder.h"
#include "core/model/rope.h"

namespace kvscope {
namespace {

void requireInRange(const std::string& field, int64_t value, int64_t count, const std::string& what) {
  if (value < 0 || value >= count) {
    throw Error(field + " " + std::to_string(value) + " is out of range: " + what + " (valid: 0-" +
                std::to_string(count - 1) + ")");
  }
}

// The rotation the forward applied at `position`: the model's Rope rebuilt
// from its config, over the same positions as the forward (longrope picks
// its factor set by the largest position of the call).
RotaryStep rotaryAt(const ModelConfig& config, int64_t tokens, int64_t position) {
  const Rope rope(config);
  const auto positions = torch::arange(tokens, torch::kInt64);
  RotaryStep step;
  step.angle = rope.angles(positions)[position];  // [D / 2]
  // theta_i is the angle at position 1; asked together with the call's last
  // position so that longrope picks the same factor set as the forward.
  const auto first_and_last = torch::tensor({int64_t{1}, std::max<int64_t>(tokens - 1, 1)}, torch::kInt64);
  step.theta = rope.angles(first_and_last)[0];  // [D / 2]
  step.magnitude = rope.magnitude();
  return step;
}

// q, k, v of the query's heads from the forward's probe points.
void readVectors(const ProbeRecorder& recorded, const ModelConfig& config, int64_t tokens, AttentionSteps& steps) {
  const int64_t P = steps.query.position, H = steps.query.head, G = steps.kv_head, T = P + 1, L = steps.query.layer;
  steps.hidden = recorded.get(Probe::LayerInput, L)[P];             // [hidden]
  steps.q = recorded.get(Probe::Query, L)[H][P];                    // [D]
  steps.keys = recorded.get(Probe::Key, L)[G].narrow(0, 0, T);      // [T, D]
  steps.values = recorded.get(Probe::Value, L)[G].narrow(0, 0, T);  // [T, D]
  if (recorded.has(Probe::QueryBeforeRope, L)) {
    steps.q_before_rope = recorded.get(Probe::QueryBeforeRope, L)[H][P];               // [D]
    steps.keys_before_rope = recorded.get(Probe::KeyBeforeRope, L)[G].narrow(0, 0, T);  // [T, D]
    steps.rotary = rotaryAt(config, tokens, P);
  } else {  // no rotary embedding: the vectors meet unrotated
    steps.q_before_rope = steps.q;
    steps.keys_before_rope = steps.keys;
  }
}

// scores -> scaled -> capped -> masked -> weights -> output, as
// core/model/attention.cpp orders them.
void computeAttention(const ProbeRecorder& recorded, AttentionSteps& steps) {
  const int64_t P = steps.query.position, T = P + 1, L = steps.query.layer;
  steps.scores = torch::mv(steps.keys, steps.q);  // [T]
  steps.scaled = steps.scores * steps.scale;      // [T]
  steps.capped = steps.softcap > 0 ? (steps.scaled / steps.softcap).tanh() * steps.softcap : steps.scaled;
  steps.visible = recorded.get(Probe::AttentionMask, L)[P].narrow(0, 0, T);  // [T] bool
  steps.masked = steps.capped.masked_fill(steps.visible.logical_not(), -std::numeric_limits<float>::infinity());
  steps.weights = torch::softmax(steps.masked, 0);     // [T]
  steps.output = torch::mv(steps.values.t(), steps.weights);  // [D]
}

// How far the recomputed steps are from the forward's own attention. Keys
// past P must carry no weight in the forward either.
double differenceFromModel(const ProbeRecorder& recorded, const AttentionSteps& steps) {
  const int64_t P = steps.query.position, H = steps.query.head, L = steps.query.layer;
  const auto model_weights = recorded.get(Probe::AttentionWeights, L)[H][P];  // [keys]
  auto padded = torch::zeros_like(model_weights);
  padded.narrow(0, 0, P + 1).copy_(steps.weights);
  const auto model_output = recorded.get(Probe::AttentionOutput, L)[H][P];  // [D]
  return std::max((padded - model_weights).abs().max().item<double>(),
                  (steps.output - model_output).abs().max().item<double>());
}

// The layer's output projection as [out = hidden, in = heads * head_dim] and
// its bias (zeros when absent). Llama-family o_proj is stored [out, in] (its
// values; the storage is column-major for inference, core/model/dense.h),
// GPT-2's c_proj is a Conv1D [in, out].
std::pair<at::Tensor, at::Tensor> outputProjection(const CausalLM& model, int64_t layer) {
  const ModelConfig& config = model.config();
  const bool gpt2 = config.arch == Architecture::Gpt2;
  const std::string prefix = gpt2 ? "transformer.h." + std::to_string(layer) + ".attn.c_proj."
                                  : "model.layers." + std::to_string(layer) + ".self_attn.o_proj.";
  at::Tensor weight, bias;
  for (const auto& [name, tensor] : model.namedParameters()) {
    if (name == prefix + "weight") weight = tensor;
    if (name == prefix + "bias") bias = tensor;
  }
  require(weight.defined(), "layer " + std::to_string(layer) + ": no output projection " + prefix + "weight");
  weight = (gpt2 ? weight.t() : denseMatrix(weight)).to(torch::kFloat32);  // [hidden, heads * D]
  bias = bias.defined() ? bias.to(torch::kFloat32) : torch::zeros({weight.size(0)}, torch::kFloat32);
  return {weight, bias};
}

// Head H's share of o_proj, and the whole projection checked against the
// forward's: every other head's output as the forward computed it.
void throughOutputProjection(const CausalLM& model, const ProbeRecorder& recorded, AttentionSteps& steps) {
  const int64_t P = steps.query.position, H = steps.query.head, L = steps.query.layer;
  const int64_t heads = model.config().num_heads, D = model.config().head_dim;
  const auto [weight, bias] = outputProjection(model, L);  // [hidden, heads * D], [hidden]
  steps.o_proj_slice = weight.narrow(1, H * D, D);                       // [hidden, D]
  steps.head_contribution = torch::mv(steps.o_proj_slice, steps.output);  // [hidden]
  steps.o_proj_bias = bias;
  steps.projected = recorded.get(Probe::AttentionProjected, L)[P];  // [hidden]
  auto sum = bias.clone();
  const auto outputs = recorded.get(Probe::AttentionOutput, L);  // [heads, n, D]
  for (int64_t h = 0; h < heads; ++h) {
    sum += h == H ? steps.head_contribution : torch::mv(weight.narrow(1, h * D, D), outputs[h][P]);
  }
  steps.projection_difference = (sum - steps.projected).abs().max().item<double>();
}

}  // namespace

void checkAttentionQuery(const ModelConfig& config, int64_t tokens, const AttentionQuery& query) {
  requireInRange("layer", query.layer, config.num_layers,
                 "the model has " + std::to_string(config.num_layers) + " layers");
  requireInRange("head", query.head, config.num_heads,
                 "the model has " + std::to_string(config.num_heads) + " query heads");
  require(tokens > 0, "position: no tokens to explain");
  requireInRange("position", query.position, tokens,
                 "the prompt has " + std::to_string(tokens) + " tokens");
}

int64_t kvHeadOf(const ModelConfig& config, int64_t head) { return head / config.groupSize(); }

std::vector<int64_t> queryHeadsSharing(const ModelConfig& config, int64_t kv_head) {
  std::vector<int64_t> heads;
  for (int64_t h = kv_head * config.groupSize(); h < (kv_head + 1) * config.groupSize(); ++h) heads.push_back(h);
  return heads;
}

AttentionSteps attentionSteps(const CausalLM& model, const std::vector<int64_t>& ids, const AttentionQuery& query) {
  const ModelConfig& config = model.config();
  const auto tokens = static_cast<int64_t>(ids.size());
  checkAttentionQuery(config, tokens, query);
  c10::InferenceMode guard;
  ProbeRecorder recorded(query.layer, {Probe::LayerInput, Probe::QueryBeforeRope, Probe::KeyBeforeRope, Probe::Query,
                                       Probe::Key, Probe::Value, Probe::AttentionMask, Probe::AttentionWeights,
                                       Probe::AttentionOutput, Probe::AttentionProjected});
  model.forward(torch::tensor(ids, torch::kInt64), 0, nullptr, &recorded, /*logit_rows=*/0);

  AttentionSteps steps;
  steps.query = query;
  steps.kv_head = kvHeadOf(config, query.head);
  steps.query_heads_sharing = queryHeadsSharing(config, steps.kv_head);
  steps.window = config.windowOf(query.layer);
  steps.scale = attentionScale(config, query.layer);
  steps.softcap = config.attn_logit_softcap;
  readVectors(recorded, config, tokens, steps);
  computeAttention(recorded, steps);
  steps.model_difference = differenceFromModel(recorded, steps);
  throughOutputProjection(model, recorded, steps);
  return steps;
}

}  // namespace kvscope
