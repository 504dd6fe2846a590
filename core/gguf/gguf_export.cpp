#include "core/gguf/gguf_export.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <functional>

#include "core/error.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_vocab.h"
#include "core/gguf/gguf_weights.h"
#include "core/model/model_config.h"

namespace kvscope {

namespace fs = std::filesystem;

namespace {

// One GGUF tensor: its llama.cpp name, its row-major shape (known without
// loading it, so each tensor is read once) and how to make it.
struct Recipe {
  std::string name;
  std::vector<int64_t> shape;
  std::function<HostTensor()> make;
};

struct Plan {
  std::string arch;
  GgufMetadata metadata;
  std::vector<Recipe> tensors;
  std::vector<std::string> notes;
};

std::string layerName(int64_t layer, const std::string& what) { return "blk." + std::to_string(layer) + "." + what; }

bool windowIsActive(const ModelConfig& c) {
  if (c.sliding_window <= 0 || c.sliding_window >= c.max_position_embeddings) return false;
  for (const bool s : c.sliding_layers)
    if (s) return true;
  return false;
}

class PlanBuilder {
 public:
  PlanBuilder(const WeightFiles& w, const ModelConfig& c, Plan& plan) : w_(w), c_(c), plan_(plan) {}

  // A checkpoint tensor under a llama.cpp name, optionally edited (an edit
  // keeps the shape unless `transpose`).
  void add(const std::string& name, const std::string& source, std::function<void(HostTensor&)> edit = {},
           bool transpose = false) {
    if (!w_.has(source)) fail("exporting", "the checkpoint has no tensor '" + source + "'");
    const WeightFiles* w = &w_;
    auto shape = w_.shape(source);
    if (transpose) std::reverse(shape.begin(), shape.end());
    plan_.tensors.push_back({name, shape, [w, source, edit, transpose] {
                               HostTensor t = w->load(source);
                               if (edit) edit(t);
                               if (transpose) t = transposed(t);
                               return t;
                             }});
  }
  void addIfPresent(const std::string& name, const std::string& source, std::function<void(HostTensor&)> edit = {}) {
    if (w_.has(source)) add(name, source, std::move(edit));
  }
  void addValues(const std::string& name, std::vector<float> values) {
    plan_.tensors.push_back({name, {static_cast<int64_t>(values.size())}, [values] {
                               HostTensor t;
                               t.shape = {static_cast<int64_t>(values.size())};
                               t.data = values;
                               return t;
                             }});
  }
  void meta(const std::string& key, GgufValue v) { plan_.metadata.emplace_back(plan_.arch + "." + key, std::move(v)); }

  // The output projection: llama.cpp reuses token_embd when output.weight is absent.
  void output() {
    if (c_.tie_word_embeddings) return;
    if (!w_.has("lm_head.weight")) fail("exporting", "tie_word_embeddings is false but the checkpoint has no lm_head.weight");
    add("output.weight", "lm_head.weight");
  }

 private:
  const WeightFiles& w_;
  const ModelConfig& c_;
  Plan& plan_;
};

std::function<void(HostTensor&)> addOne() {
  return [](HostTensor& t) {
    for (auto& x : t.data) x += 1.0f;
  };
}
std::function<void(HostTensor&)> scaleBy(double s) {
  return [s](HostTensor& t) {
    for (auto& x : t.data) x = static_cast<float>(x * s);
  };
}
std::function<void(HostTensor&)> interleave(int64_t heads) {
  return [heads](HostTensor& t) { t = interleaveHeads(t, heads); };
}

void commonDecoderMetadata(PlanBuilder& b, const ModelConfig& c) {
  b.meta("context_length", GgufValue::u32(static_cast<uint32_t>(c.max_position_embeddings)));
  b.meta("embedding_length", GgufValue::u32(static_cast<uint32_t>(c.hidden_size)));
  b.meta("block_count", GgufValue::u32(static_cast<uint32_t>(c.num_layers)));
  b.meta("feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.intermediate_size)));
  b.meta("attention.head_count", GgufValue::u32(static_cast<uint32_t>(c.num_heads)));
  b.meta("attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(c.num_kv_heads)));
  b.meta("attention.key_length", GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
  b.meta("attention.value_length", GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
  b.meta("attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(c.norm_eps)));
  b.meta("rope.freq_base", GgufValue::f32(static_cast<float>(c.rope_theta)));
  b.meta("rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
}

// Llama-style blocks with separate q/k/v and gate/up projections.
void llamaBlocks(PlanBuilder& b, const ModelConfig& c, bool interleave_qk) {
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const auto q_edit = interleave_qk ? interleave(c.num_heads) : std::function<void(HostTensor&)>{};
    const auto k_edit = interleave_qk ? interleave(c.num_kv_heads) : std::function<void(HostTensor&)>{};
    b.add(layerName(l, "attn_norm.weight"), hf + "input_layernorm.weight");
    for (const char* kind : {"weight", "bias"}) {
      const std::string k(kind);
      const auto req = [&](const std::string& n, const std::string& s, std::function<void(HostTensor&)> e) {
        if (k == "weight") b.add(n, s, std::move(e));
        else b.addIfPresent(n, s, std::move(e));
      };
      req(layerName(l, "attn_q." + k), hf + "self_attn.q_proj." + k, q_edit);
      req(layerName(l, "attn_k." + k), hf + "self_attn.k_proj." + k, k_edit);
      req(layerName(l, "attn_v." + k), hf + "self_attn.v_proj." + k, {});
      req(layerName(l, "attn_output." + k), hf + "self_attn.o_proj." + k, {});
      req(layerName(l, "ffn_gate." + k), hf + "mlp.gate_proj." + k, {});
      req(layerName(l, "ffn_up." + k), hf + "mlp.up_proj." + k, {});
      req(layerName(l, "ffn_down." + k), hf + "mlp.down_proj." + k, {});
    }
    b.add(layerName(l, "ffn_norm.weight"), hf + "post_attention_layernorm.weight");
  }
}

void planLlama(PlanBuilder& b, Plan& plan, const ModelConfig& c) {
  plan.arch = "llama";
  commonDecoderMetadata(b, c);
  b.meta("vocab_size", GgufValue::u32(static_cast<uint32_t>(c.vocab_size)));
  if (c.rope_scaling.type == RopeScaling::Type::Linear) {
    b.meta("rope.scaling.type", GgufValue::string("linear"));
    b.meta("rope.scaling.factor", GgufValue::f32(static_cast<float>(c.rope_scaling.factor)));
  }
  b.add("token_embd.weight", "model.embed_tokens.weight");
  b.add("output_norm.weight", "model.norm.weight");
  b.output();
  llamaBlocks(b, c, /*interleave_qk=*/true);
  plan.notes.push_back("attn_q/attn_k rows interleaved per head for llama.cpp's rotary layout");
}

void planQwen(PlanBuilder& b, Plan& plan, const ModelConfig& c) {
  plan.arch = c.model_type == "qwen3" ? "qwen3" : "qwen2";
  commonDecoderMetadata(b, c);
  b.add("token_embd.weight", "model.embed_tokens.weight");
  b.add("output_norm.weight", "model.norm.weight");
  b.output();
  llamaBlocks(b, c, /*interleave_qk=*/false);
  if (plan.arch == "qwen3") {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string hf = "model.layers." + std::to_string(l) + ".self_attn.";
      b.add(layerName(l, "attn_q_norm.weight"), hf + "q_norm.weight");
      b.add(layerName(l, "attn_k_norm.weight"), hf + "k_norm.weight");
    }
  }
}

// llama.cpp's Gemma 2 scales queries by 1/sqrt(head_dim) (1/sqrt(hidden/heads)
// for its 46-layer 27B), ignoring query_pre_attn_scalar; the rotary embedding
// is linear, so scaling attn_q by the ratio gives the checkpoint's scale.
double gemmaQueryFold(const ModelConfig& c) {
  const double wanted = c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const double used = c.num_layers == 46 ? 1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads))
                                         : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return wanted / used;
}

void planGemma2(PlanBuilder& b, Plan& plan, const ModelConfig& c) {
  plan.arch = "gemma2";
  if (!c.tie_word_embeddings) fail("exporting", "Gemma 2 with a separate lm_head (llama.cpp's gemma2 always reuses token_embd)");
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.sliding_window > 0 && c.sliding_layers[static_cast<size_t>(l)] != (l % 2 == 0))
      fail("exporting", "Gemma 2 whose sliding layers are not the even ones (llama.cpp's gemma2 slides on even layers)");
  commonDecoderMetadata(b, c);
  if (c.sliding_window > 0) b.meta("attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
  b.meta("attn_logit_softcapping", GgufValue::f32(static_cast<float>(c.attn_logit_softcap)));
  b.meta("final_logit_softcapping", GgufValue::f32(static_cast<float>(c.final_logit_softcap)));
  b.add("token_embd.weight", "model.embed_tokens.weight");
  b.add("output_norm.weight", "model.norm.weight", addOne());
  const double fold = gemmaQueryFold(c);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    b.add(layerName(l, "attn_norm.weight"), hf + "input_layernorm.weight", addOne());
    b.add(layerName(l, "attn_q.weight"), hf + "self_attn.q_proj.weight", fold != 1.0 ? scaleBy(fold) : nullptr);
    b.add(layerName(l, "attn_k.weight"), hf + "self_attn.k_proj.weight");
    b.add(layerName(l, "attn_v.weight"), hf + "self_attn.v_proj.weight");
    b.add(layerName(l, "attn_output.weight"), hf + "self_attn.o_proj.weight");
    b.add(layerName(l, "post_attention_norm.weight"), hf + "post_attention_layernorm.weight", addOne());
    b.add(layerName(l, "ffn_norm.weight"), hf + "pre_feedforward_layernorm.weight", addOne());
    b.add(layerName(l, "ffn_gate.weight"), hf + "mlp.gate_proj.weight");
    b.add(layerName(l, "ffn_up.weight"), hf + "mlp.up_proj.weight");
    b.add(layerName(l, "ffn_down.weight"), hf + "mlp.down_proj.weight");
    b.add(layerName(l, "post_ffw_norm.weight"), hf + "post_feedforward_layernorm.weight", addOne());
  }
  plan.notes.push_back("norm weights stored as 1 + w (Gemma's RMSNorm)");
  if (fold != 1.0)
    plan.notes.push_back("query_pre_attn_scalar folded into attn_q (x" + formatNumber(fold) + "): llama.cpp scales by 1/sqrt(head_dim)");
}

void planPhi3(PlanBuilder& b, Plan& plan, const ModelConfig& c) {
  plan.arch = "phi3";
  commonDecoderMetadata(b, c);
  b.meta("attention.sliding_window", GgufValue::u32(0));
  const auto& rs = c.rope_scaling;
  if (rs.type == RopeScaling::Type::LongRope) {
    const double scale = static_cast<double>(c.max_position_embeddings) / static_cast<double>(rs.original_max_position_embeddings);
    const double attn = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(rs.original_max_position_embeddings))) : 1.0;
    b.meta("rope.scaling.original_context_length", GgufValue::u32(static_cast<uint32_t>(rs.original_max_position_embeddings)));
    b.meta("rope.scaling.attn_factor", GgufValue::f32(static_cast<float>(attn)));
    b.addValues("rope_factors_long.weight", std::vector<float>(rs.long_factor.begin(), rs.long_factor.end()));
    b.addValues("rope_factors_short.weight", std::vector<float>(rs.short_factor.begin(), rs.short_factor.end()));
    plan.notes.push_back("longrope: llama.cpp picks the long factors when the context is larger than " +
                         std::to_string(rs.original_max_position_embeddings) +
                         " cells (its contexts are padded to 256), Hugging Face per forward call by its length");
  }
  b.add("token_embd.weight", "model.embed_tokens.weight");
  b.add("output_norm.weight", "model.norm.weight");
  b.output();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    b.add(layerName(l, "attn_norm.weight"), hf + "input_layernorm.weight");
    b.add(layerName(l, "attn_qkv.weight"), hf + "self_attn.qkv_proj.weight");
    b.add(layerName(l, "attn_output.weight"), hf + "self_attn.o_proj.weight");
    b.add(layerName(l, "ffn_norm.weight"), hf + "post_attention_layernorm.weight");
    b.add(layerName(l, "ffn_up.weight"), hf + "mlp.gate_up_proj.weight");  // [gate; up], as llama.cpp's swiglu splits it
    b.add(layerName(l, "ffn_down.weight"), hf + "mlp.down_proj.weight");
  }
}

void planGpt2(PlanBuilder& b, Plan& plan, const ModelConfig& c, const WeightFiles& w) {
  plan.arch = "gpt2";
  if (!c.scale_attn_weights || c.scale_attn_by_inverse_layer_idx)
    fail("exporting", "GPT-2 with scale_attn_weights false or scale_attn_by_inverse_layer_idx (llama.cpp scales by 1/sqrt(head_dim) only)");
  const std::string p = w.has("transformer.wte.weight") ? "transformer." : "";
  b.meta("context_length", GgufValue::u32(static_cast<uint32_t>(c.max_position_embeddings)));
  b.meta("embedding_length", GgufValue::u32(static_cast<uint32_t>(c.hidden_size)));
  b.meta("block_count", GgufValue::u32(static_cast<uint32_t>(c.num_layers)));
  b.meta("feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.intermediate_size)));
  b.meta("attention.head_count", GgufValue::u32(static_cast<uint32_t>(c.num_heads)));
  b.meta("attention.layer_norm_epsilon", GgufValue::f32(static_cast<float>(c.norm_eps)));
  b.add("token_embd.weight", p + "wte.weight");
  b.add("position_embd.weight", p + "wpe.weight");
  b.add("output_norm.weight", p + "ln_f.weight");
  b.add("output_norm.bias", p + "ln_f.bias");
  b.output();
  const bool conv1d = true;  // HF Conv1D stores [in, out]: transposed
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string hf = p + "h." + std::to_string(l) + ".";
    b.add(layerName(l, "attn_norm.weight"), hf + "ln_1.weight");
    b.add(layerName(l, "attn_norm.bias"), hf + "ln_1.bias");
    b.add(layerName(l, "attn_qkv.weight"), hf + "attn.c_attn.weight", {}, conv1d);
    b.add(layerName(l, "attn_qkv.bias"), hf + "attn.c_attn.bias");
    b.add(layerName(l, "attn_output.weight"), hf + "attn.c_proj.weight", {}, conv1d);
    b.add(layerName(l, "attn_output.bias"), hf + "attn.c_proj.bias");
    b.add(layerName(l, "ffn_norm.weight"), hf + "ln_2.weight");
    b.add(layerName(l, "ffn_norm.bias"), hf + "ln_2.bias");
    b.add(layerName(l, "ffn_up.weight"), hf + "mlp.c_fc.weight", {}, conv1d);
    b.add(layerName(l, "ffn_up.bias"), hf + "mlp.c_fc.bias");
    b.add(layerName(l, "ffn_down.weight"), hf + "mlp.c_proj.weight", {}, conv1d);
    b.add(layerName(l, "ffn_down.bias"), hf + "mlp.c_proj.bias");
  }
}

// Refuses what llama.cpp's architecture for the family would compute differently.
void requireSupported(const ModelConfig& c, const std::string& dir) {
  static const char* kTypes[] = {"llama", "mistral", "qwen2", "qwen3", "gemma2", "phi3", "gpt2"};
  if (std::find(std::begin(kTypes), std::end(kTypes), c.model_type) == std::end(kTypes))
    fail(dir, "model_type '" + c.model_type + "' is not exported (supported: llama, mistral, qwen2, qwen3, gemma2, phi3, gpt2)");
  if (c.model_type != "gemma2" && windowIsActive(c))
    fail(dir, c.model_type + " with sliding_window " + std::to_string(c.sliding_window) +
                  ": llama.cpp's " + (c.model_type == "phi3" ? "phi3" : c.model_type == "mistral" ? "llama" : c.model_type) +
                  " architecture attends to every earlier position, so logits past position " +
                  std::to_string(c.sliding_window) + " would differ");
  const auto rope = c.rope_scaling.type;
  if (rope == RopeScaling::Type::Llama3) fail(dir, "rope_scaling 'llama3' is not exported yet");
  if (rope == RopeScaling::Type::LongRope && c.model_type != "phi3") fail(dir, "rope_scaling 'longrope' outside Phi-3 is not exported");
  if (rope == RopeScaling::Type::Linear && c.model_type != "llama" && c.model_type != "mistral")
    fail(dir, "rope_scaling 'linear' is exported for Llama and Mistral only");
  if (c.activation != "silu" && c.model_type != "gemma2" && c.model_type != "gpt2")
    fail(dir, "hidden_act '" + c.activation + "' (llama.cpp's " + c.model_type + " uses SiLU)");
}

GgufExportReport writePlan(const Plan& plan, const GgufVocab& vocab, const std::string& out_path, GgufExportDType dtype) {
  std::vector<GgufTensorOut> outs;
  for (const auto& r : plan.tensors) {
    const bool keep_f32 = r.shape.size() < 2 || dtype == GgufExportDType::F32;
    GgufTensorOut o;
    o.name = r.name;
    o.type = keep_f32 ? GgmlType::F32 : GgmlType::F16;
    for (auto it = r.shape.rbegin(); it != r.shape.rend(); ++it) o.ne.push_back(static_cast<uint64_t>(*it));
    const auto make = r.make;
    o.bytes = [make, keep_f32] {
      const HostTensor t = make();
      std::vector<uint8_t> bytes(t.data.size() * (keep_f32 ? 4 : 2));
      if (keep_f32) {
        std::memcpy(bytes.data(), t.data.data(), bytes.size());
      } else {
        for (size_t i = 0; i < t.data.size(); ++i) {
          const uint16_t h = floatToHalf(t.data[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      }
      return bytes;
    };
    outs.push_back(std::move(o));
  }
  GgufMetadata kv;
  kv.emplace_back("general.architecture", GgufValue::string(plan.arch));
  kv.emplace_back("general.name", GgufValue::string(fs::path(out_path).stem().string()));
  kv.emplace_back("general.file_type", GgufValue::u32(dtype == GgufExportDType::F32 ? 0 : 1));
  kv.insert(kv.end(), plan.metadata.begin(), plan.metadata.end());
  kv.insert(kv.end(), vocab.metadata.begin(), vocab.metadata.end());
  writeGguf(out_path, kv, outs);
  GgufExportReport report;
  report.architecture = plan.arch;
  report.tokenizer = vocab.model + " (pre " + vocab.pre + ")";
  report.tensors = static_cast<int64_t>(outs.size());
  report.tokens = vocab.tokens;
  report.bytes = fs::file_size(out_path);
  report.notes = plan.notes;
  return report;
}

}  // namespace

GgufExportReport exportGguf(const std::string& model_dir, const std::string& out_path, GgufExportDType dtype) {
  const ModelConfig c = loadModelConfig((fs::path(model_dir) / "config.json").string());
  requireSupported(c, model_dir);
  const WeightFiles w = WeightFiles::open(model_dir);
  const int64_t bos = c.bos_token_ids.empty() ? -1 : c.bos_token_ids.front();
  const int64_t eos = c.eos_token_ids.empty() ? -1 : c.eos_token_ids.front();
  const GgufVocab vocab = convertVocab(model_dir, c.vocab_size, bos, eos);
  Plan plan;
  PlanBuilder b(w, c, plan);
  if (c.model_type == "llama" || c.model_type == "mistral") {
    plan.arch = "llama";
    planLlama(b, plan, c);
  } else if (c.model_type == "qwen2" || c.model_type == "qwen3") {
    plan.arch = c.model_type;
    planQwen(b, plan, c);
  } else if (c.model_type == "gemma2") {
    plan.arch = "gemma2";
    planGemma2(b, plan, c);
  } else if (c.model_type == "phi3") {
    plan.arch = "phi3";
    planPhi3(b, plan, c);
  } else {
    plan.arch = "gpt2";
    planGpt2(b, plan, c, w);
  }
  return writePlan(plan, vocab, out_path, dtype);
}

}  // namespace kvscope
