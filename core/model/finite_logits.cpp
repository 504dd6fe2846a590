#include "core/model/finite_logits.h"

#include <cmath>
#include <cstdlib>
#include <cstdint>

#include <ATen/ops/aminmax.h>

namespace kvscope {
namespace {

// What one step of the forward computes from, for the error message.
struct StepCause {
  std::string step;     // "the query after RoPE"
  std::string fields;   // config.json fields the step depends on
  std::string weights;  // checkpoint tensors it reads
};

bool gpt2(const ModelConfig& c) { return c.arch == Architecture::Gpt2; }

std::string epsField(const ModelConfig& c) { return gpt2(c) ? "layer_norm_epsilon" : "rms_norm_eps"; }

std::string layerPrefix(const ModelConfig& c, int64_t layer) {
  return (gpt2(c) ? "transformer.h." : "model.layers.") + std::to_string(layer) + ".";
}

std::string ropeFields(const ModelConfig& c) {
  if (c.rope_scaling.type == RopeScaling::Type::LongRope)
    return "rope_theta, rope_scaling (short_factor, long_factor), original_max_position_embeddings, max_position_embeddings";
  if (c.rope_scaling.type != RopeScaling::Type::None) return "rope_theta, rope_scaling";
  return "rope_theta";
}

std::string scoreFields(const ModelConfig& c) {
  if (gpt2(c)) return "scale_attn_weights, scale_attn_by_inverse_layer_idx";
  if (c.family == DecoderFamily::Gemma2) return "query_pre_attn_scalar, attn_logit_softcapping";
  return "head_dim";
}

StepCause inputCause(const ModelConfig& c, int64_t layer) {
  const std::string p = layerPrefix(c, layer);
  const std::string norm = p + (gpt2(c) ? "ln_1" : "input_layernorm") + ".weight";
  if (layer > 0) return {"the layer's input after its norm", epsField(c), norm};
  const std::string embedding = gpt2(c) ? "transformer.wte.weight, transformer.wpe.weight" : "model.embed_tokens.weight";
  return {"the embedded tokens after the first norm", epsField(c), embedding + ", " + norm};
}

StepCause projectionCause(const ModelConfig& c, Probe point, int64_t layer) {
  const std::string p = layerPrefix(c, layer);
  if (gpt2(c)) return {std::string("the ") + probeName(point), "", p + "attn.c_attn"};
  const bool query = point == Probe::QueryBeforeRope;
  const std::string proj = p + "self_attn." + (point == Probe::Value ? "v_proj" : query ? "q_proj" : "k_proj");
  if (c.qk_norm && point != Probe::Value)
    return {std::string("the ") + probeName(point), epsField(c), proj + ", " + p + "self_attn." + (query ? "q_norm" : "k_norm")};
  return {std::string("the ") + probeName(point) + " projection", "", proj};
}

StepCause mlpCause(const ModelConfig& c, int64_t layer) {
  const std::string p = layerPrefix(c, layer);
  if (gpt2(c)) return {"the MLP (the layer's output)", epsField(c) + ", activation_function", p + "ln_2, " + p + "mlp"};
  std::string norms = p + "post_attention_layernorm";
  if (c.family == DecoderFamily::Gemma2) norms += ", " + p + "pre_feedforward_layernorm, " + p + "post_feedforward_layernorm";
  return {"the MLP (the layer's output)", epsField(c) + ", hidden_act, intermediate_size", norms + ", " + p + "mlp"};
}

StepCause causeOf(const ModelConfig& c, Probe point, int64_t layer) {
  const std::string p = layerPrefix(c, layer);
  switch (point) {
    case Probe::LayerInput: return inputCause(c, layer);
    case Probe::QueryBeforeRope:
    case Probe::KeyBeforeRope:
    case Probe::Value: return projectionCause(c, point, layer);
    case Probe::Query:
    case Probe::Key:
      if (gpt2(c)) return projectionCause(c, point, layer);  // GPT-2 has no rotary step
      return {std::string("the ") + probeName(point) + " after RoPE", ropeFields(c), ""};
    case Probe::AttentionWeights:
    case Probe::AttentionMask: return {"the attention weights (softmax of the scaled scores)", scoreFields(c), ""};
    case Probe::AttentionOutput: return {"the attention output (weights times values)", "", ""};
    case Probe::AttentionProjected:
      return {"the attention's output projection", "", p + (gpt2(c) ? "attn.c_proj" : "self_attn.o_proj")};
    case Probe::LayerOutput: return mlpCause(c, layer);
  }
  return {probeName(point), "", ""};
}

StepCause finalCause(const ModelConfig& c) {
  const std::string norm = gpt2(c) ? "transformer.ln_f" : "model.norm.weight";
  const std::string head = c.tie_word_embeddings ? (gpt2(c) ? "transformer.wte.weight (tied head)" : "model.embed_tokens.weight (tied head)")
                                                 : "lm_head.weight";
  std::string fields = epsField(c);
  if (c.final_logit_softcap > 0) fields += ", final_logit_softcapping";
  return {"after the last layer: the final norm, the output head" +
              std::string(c.final_logit_softcap > 0 ? " or the logit soft-cap" : ""),
          fields, norm + ", " + head};
}

}  // namespace

bool allFinite(const at::Tensor& x) {
  if (x.numel() == 0) return true;
  if (x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu()) {
    // A plain pass over the bits (an all-ones exponent is Inf or NaN), which
    // the compiler vectorises: the two reductions and their reads back cost
    // a small drafter's step a twentieth of its time.
    const auto* bits = static_cast<const uint32_t*>(x.data_ptr());
    const int64_t count = x.numel();
    uint32_t non_finite = 0;
    for (int64_t i = 0; i < count; ++i) non_finite |= static_cast<uint32_t>((bits[i] & 0x7f800000u) == 0x7f800000u);
    return non_finite == 0;
  }
  // min and max propagate NaN, and an Inf is one of them: two numbers
  // decide, without a [rows, vocab] mask of isfinite().
  const auto [lo, hi] = at::aminmax(x);
  return std::isfinite(lo.item<double>()) && std::isfinite(hi.item<double>());
}

bool finiteGuardEnabled() {
  static const bool enabled = std::getenv("KVSCOPE_MEASURE_NO_FINITE_GUARD") == nullptr;
  return enabled;
}

void FirstNonFinite::record(Probe point, int64_t layer, const at::Tensor& value) {
  if (found_ || !value.is_floating_point() || allFinite(value)) return;
  found_ = true;
  point_ = point;
  layer_ = layer;
}

std::string describeNonFinite(const ModelConfig& config, const FirstNonFinite& site, bool stale_cache) {
  const StepCause cause = site.found() ? causeOf(config, site.point(), site.layer()) : finalCause(config);
  std::string where = site.found() ? "in layer " + std::to_string(site.layer()) + ", at " + cause.step : cause.step;
  std::string text = "values first became non-finite " + where;
  if (stale_cache) {
    text += ", because the cache rows it read were already non-finite (written by an earlier forward)";
  }
  if (!cause.fields.empty()) text += "; config fields involved: " + cause.fields;
  if (!cause.weights.empty()) text += (cause.fields.empty() ? "; " : "; or ") + std::string("the weights of ") + cause.weights;
  return text;
}

}  // namespace kvscope
