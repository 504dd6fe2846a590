#include "core/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/json_limits.h"

namespace kvscope {
namespace {

using nlohmann::json;

const char* kSupported =
    "GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, "
    "Phi3ForCausalLM";

// Upper bounds for sizes read from config.json: far above any real model,
// low enough that products of two of them (vocab x hidden, layers x ...) can
// neither overflow nor ask for terabytes before a tensor is checked.
constexpr int64_t kMaxDimension = int64_t{1} << 20;    // hidden, intermediate, head_dim
constexpr int64_t kMaxCount = 4096;                     // layers, heads
constexpr int64_t kMaxVocabulary = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 24;

int64_t upperBoundOf(const std::string& key) {
  if (key == "vocab_size") return kMaxVocabulary;
  if (key == "n_positions" || key == "max_position_embeddings" || key == "sliding_window" ||
      key == "original_max_position_embeddings" || key == "max_window_layers") {
    return kMaxPositions;
  }
  if (key == "n_layer" || key == "num_hidden_layers" || key == "n_head" || key == "num_attention_heads" ||
      key == "num_key_value_heads") {
    return kMaxCount;
  }
  return kMaxDimension;
}

int64_t requireInt(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) fail(source, std::string("missing required field '") + key + "'");
  return jsonInteger(j[key], source, std::string("'") + key + "'", 1, upperBoundOf(key));
}

int64_t optionalInt(const json& j, const char* key, int64_t fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return jsonInteger(j[key], source, std::string("'") + key + "'", 1, upperBoundOf(key));
}

// A finite number in [min, max]; the error names the field and the range.
double optionalNumber(const json& j, const char* key, double fallback, const std::string& source,
                      double min = -1e30, double max = 1e30) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) fail(source, std::string("field '") + key + "' must be a number, got " + jsonSnippet(j[key]));
  const double value = j[key].get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    fail(source, std::string("field '") + key + "' must be a finite number in " + range.str() + ", got " +
                     jsonSnippet(j[key]));
  }
  return value;
}

// An optional string field (model_type, hidden_act): anything else is refused by name.
std::string optionalString(const json& j, const char* key, const std::string& fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return jsonString(j[key], source, key);
}

bool optionalBool(const json& j, const char* key, bool fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) fail(source, std::string("field '") + key + "' must be true or false");
  return j[key].get<bool>();
}

// eos_token_id / bos_token_id: null, an int, or a list of ints (Llama 3).
std::vector<int64_t> tokenIdList(const json& j, const char* key, const std::string& source) {
  std::vector<int64_t> ids;
  if (!j.contains(key) || j[key].is_null()) return ids;
  const json& v = j[key];
  if (v.is_number()) {
    ids.push_back(jsonInteger(v, source, key, 0, kMaxVocabulary - 1));
  } else if (v.is_array()) {
    ids = jsonIntegers(v, source, key, 0, kMaxVocabulary - 1);
  } else {
    fail(source, std::string("field '") + key + "' must be an integer or a list of integers");
  }
  return ids;
}

// Rope factors and soft-caps are read in double but used in float32: 1e-300
// becomes 0 there, and 1 / (0 * base^x) or x / 0 turn every rotary angle or
// logit into Inf or NaN. Factors stay where float32 keeps them and their
// products with rope_theta (<= 1e12) finite; real ones lie in [1, 100].
constexpr double kMinFactor = 1e-6;
constexpr double kMaxFactor = 1e6;

// A norm adds eps to the mean square before 1/sqrt: 0 turns an all-zero row
// into 0 * Inf = NaN, and an eps float32 rounds to 0 (1e-300) does the same.
// 1e-30 stays a normal float32 with 1/sqrt(eps) = 1e15; real models use 1e-12
// to 1e-5.
constexpr double kMinNormEps = 1e-30;
// inv_freq = theta^(-2i/d): a base below 1 makes the "slow" dimensions spin
// faster than the fast ones (1 makes every dimension rotate alike), which no
// model was trained with; real bases lie in [1e4, 1e7].
constexpr double kMinRopeTheta = 1.0;
constexpr double kMaxRopeTheta = 1e12;

std::vector<double> factorList(const json& rs, const char* key, const std::string& source) {
  if (!rs.contains(key) || !rs[key].is_array()) fail(source, std::string("rope_scaling 'longrope' needs a list '") + key + "'");
  std::vector<double> factors;
  for (size_t i = 0; i < rs[key].size(); ++i) {
    const json& f = rs[key][i];
    const double value = f.is_number() ? f.get<double>() : 0.0;
    if (!f.is_number() || !std::isfinite(value) || value < kMinFactor || value > kMaxFactor) {
      fail(source, std::string("field 'rope_scaling.") + key + "[" + std::to_string(i) + "]' must be a number in [" +
                       formatNumber(kMinFactor) + ", " + formatNumber(kMaxFactor) + "], got " + jsonSnippet(f));
    }
    factors.push_back(value);
  }
  return factors;
}

// Phi-3's longrope: the factor lists, and the original context they switch at
// (a top-level field in Phi-3 configs, or inside rope_scaling).
RopeScaling parseLongRope(const json& j, const json& rs, const std::string& source) {
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::LongRope;
  scaling.short_factor = factorList(rs, "short_factor", source);
  scaling.long_factor = factorList(rs, "long_factor", source);
  const json& holder = rs.contains("original_max_position_embeddings") ? rs : j;
  if (!holder.contains("original_max_position_embeddings")) {
    fail(source, "rope_scaling 'longrope' needs a positive integer 'original_max_position_embeddings'");
  }
  // cos/sin are scaled by sqrt(1 + ln(max / original) / ln(original)): an
  // original context of 1 divides by ln(1) = 0 and makes every logit NaN.
  scaling.original_max_position_embeddings =
      jsonInteger(holder["original_max_position_embeddings"], source, "'original_max_position_embeddings'", 2, kMaxPositions);
  return scaling;
}

std::string architectureName(const json& j, const std::string& source) {
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    return j["architectures"][0].get<std::string>();
  }
  // Older configs carry only model_type.
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string type = j["model_type"].get<std::string>();
    if (type == "gpt2") return "GPT2LMHeadModel";
    if (type == "llama") return "LlamaForCausalLM";
    if (type == "qwen2") return "Qwen2ForCausalLM";
    if (type == "mistral") return "MistralForCausalLM";
    fail(source, "unsupported model_type '" + type + "' (supported: " + kSupported + ")");
  }
  fail(source, "missing required field 'architectures' (or 'model_type')");
}

// An eos or bos id the vocabulary lacks: generation could never stop on it
// (or start with it), and nothing would say so.
void checkIdsInVocabulary(const std::vector<int64_t>& ids, const char* key, int64_t vocab_size,
                          const std::string& source) {
  for (int64_t id : ids) {
    if (id >= vocab_size) {
      fail(source, std::string("field '") + key + "' holds " + std::to_string(id) + ", outside the vocabulary (vocab_size " +
                       std::to_string(vocab_size) + ": ids 0 to " + std::to_string(vocab_size - 1) + ")");
    }
  }
}

RopeScaling parseRopeScaling(const json& j, const std::string& source) {
  RopeScaling scaling;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return scaling;
  const json& rs = j["rope_scaling"];
  if (!rs.is_object()) fail(source, "field 'rope_scaling' must be an object or null");
  std::string type;
  if (rs.contains("rope_type") && rs["rope_type"].is_string()) type = rs["rope_type"];
  else if (rs.contains("type") && rs["type"].is_string()) type = rs["type"];
  else fail(source, "rope_scaling has no 'rope_type' or 'type'");
  if (type == "longrope" || type == "su") return parseLongRope(j, rs, source);
  if (type == "default") return scaling;
  if (type != "linear" && type != "llama3") {
    fail(source, "unsupported rope_scaling type '" + type + "' (supported: linear, llama3, longrope)");
  }
  scaling.type = type == "linear" ? RopeScaling::Type::Linear : RopeScaling::Type::Llama3;
  if (!rs.contains("factor") || !rs["factor"].is_number()) fail(source, "rope_scaling '" + type + "' needs a numeric 'factor'");
  scaling.factor = optionalNumber(rs, "factor", 1.0, source, kMinFactor, kMaxFactor);
  if (scaling.type == RopeScaling::Type::Llama3) {
    for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!rs.contains(key) || !rs[key].is_number()) fail(source, std::string("rope_scaling 'llama3' needs '") + key + "'");
    }
    scaling.low_freq_factor = optionalNumber(rs, "low_freq_factor", 1.0, source, kMinFactor, kMaxFactor);
    scaling.high_freq_factor = optionalNumber(rs, "high_freq_factor", 1.0, source, kMinFactor, kMaxFactor);
    scaling.original_max_position_embeddings =
        jsonInteger(rs["original_max_position_embeddings"], source, "original_max_position_embeddings", 1, kMaxPositions);
    if (scaling.high_freq_factor <= scaling.low_freq_factor) fail(source, "rope_scaling: high_freq_factor must exceed low_freq_factor");
  }
  return scaling;
}

void parseGpt2(const json& j, ModelConfig& c, const std::string& source) {
  c.arch = Architecture::Gpt2;
  c.vocab_size = requireInt(j, "vocab_size", source);
  c.hidden_size = requireInt(j, "n_embd", source);
  c.num_layers = requireInt(j, "n_layer", source);
  c.num_heads = requireInt(j, "n_head", source);
  c.num_kv_heads = c.num_heads;
  c.max_position_embeddings = requireInt(j, "n_positions", source);
  c.intermediate_size = optionalInt(j, "n_inner", 4 * c.hidden_size, source);
  c.activation = optionalString(j, "activation_function", "gelu_new", source);
  c.norm_eps = optionalNumber(j, "layer_norm_epsilon", 1e-5, source, kMinNormEps, 1.0);
  c.tie_word_embeddings = optionalBool(j, "tie_word_embeddings", true, source);
  c.scale_attn_weights = optionalBool(j, "scale_attn_weights", true, source);
  c.scale_attn_by_inverse_layer_idx = optionalBool(j, "scale_attn_by_inverse_layer_idx", false, source);
  if (c.hidden_size % c.num_heads != 0) fail(source, "n_embd is not a multiple of n_head");
  c.head_dim = c.hidden_size / c.num_heads;
}

// Gemma 2's cap * tanh(x / cap): 0 or null turns it off. A cap below 1
// squeezes every score into (-1, 1), a near-uniform distribution, and one
// that float32 rounds to 0 divides by zero; trained models use 30 and 50.
double softcap(const json& j, const char* key, const std::string& source) {
  const double cap = optionalNumber(j, key, 0.0, source, 0.0, 1e6);
  if (cap != 0 && cap < 1) {
    fail(source, std::string("field '") + key + "' must be 0 (no cap) or a number in [1, 1e+06], got " +
                     jsonSnippet(j[key]) + ": a smaller cap flattens every score to about the same value");
  }
  return cap;
}

// A window that applies to every layer (Mistral, Phi-3) or to the even ones (Gemma 2).
void parseSlidingWindow(const json& j, ModelConfig& c, const std::string& source, bool even_layers_only) {
  c.sliding_layers.assign(static_cast<size_t>(c.num_layers), false);
  if (!j.contains("sliding_window") || j["sliding_window"].is_null()) return;
  c.sliding_window = jsonInteger(j["sliding_window"], source, "sliding_window", 1, kMaxPositions);
  for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = !even_layers_only || l % 2 == 0;
}

// What each family adds to the Llama blocks (see core/model/decoder_family.h).
void parseFamilyDetails(const json& j, ModelConfig& c, const std::string& source) {
  c.sliding_layers.assign(static_cast<size_t>(c.num_layers), false);
  switch (c.family) {
    case DecoderFamily::Llama:
      if (c.architecture_name == "MistralForCausalLM") parseSlidingWindow(j, c, source, false);
      if (optionalBool(j, "use_sliding_window", false, source)) {
        // Qwen2's window applies only to some layers and only in some
        // attention paths of the reference; kvscope does not model it.
        fail(source, "use_sliding_window true is not supported for " + c.architecture_name +
                         " (kvscope would compute full attention; set it to false to run without a window)");
      }
      break;
    case DecoderFamily::Qwen3:
      c.qkv_bias = optionalBool(j, "attention_bias", false, source);  // q/k/v and o together
      c.qk_norm = true;
      if (optionalBool(j, "use_sliding_window", false, source)) {
        fail(source, "use_sliding_window true is not supported for Qwen3ForCausalLM");
      }
      break;
    case DecoderFamily::Gemma2: {
      c.activation = optionalString(j, "hidden_activation", optionalString(j, "hidden_act", "gelu_pytorch_tanh", source), source);
      parseSlidingWindow(j, c, source, true);
      const double scalar = optionalNumber(j, "query_pre_attn_scalar", static_cast<double>(c.head_dim), source, 1e-6, 1e12);
      c.attention_scale = 1.0 / std::sqrt(scalar);
      c.attn_logit_softcap = softcap(j, "attn_logit_softcapping", source);
      c.final_logit_softcap = softcap(j, "final_logit_softcapping", source);
      break;
    }
    case DecoderFamily::Phi3:
      // Newer transformers apply Phi-3's window like Mistral's (4.43.4's eager
      // path ignored it); the two agree below the window.
      parseSlidingWindow(j, c, source, false);
      break;
  }
}

void parseLlamaFamily(const json& j, ModelConfig& c, const std::string& source) {
  c.arch = Architecture::Llama;
  c.vocab_size = requireInt(j, "vocab_size", source);
  c.hidden_size = requireInt(j, "hidden_size", source);
  c.num_layers = requireInt(j, "num_hidden_layers", source);
  c.num_heads = requireInt(j, "num_attention_heads", source);
  c.intermediate_size = requireInt(j, "intermediate_size", source);
  c.num_kv_heads = optionalInt(j, "num_key_value_heads", c.num_heads, source);
  c.max_position_embeddings = optionalInt(j, "max_position_embeddings", 2048, source);
  c.activation = optionalString(j, "hidden_act", "silu", source);
  c.norm_eps = optionalNumber(j, "rms_norm_eps", 1e-6, source, kMinNormEps, 1.0);
  c.rope_theta = optionalNumber(j, "rope_theta", 10000.0, source, kMinRopeTheta, kMaxRopeTheta);
  c.rope_scaling = parseRopeScaling(j, source);
  c.tie_word_embeddings = optionalBool(j, "tie_word_embeddings", c.family == DecoderFamily::Gemma2, source);
  const bool attention_bias = optionalBool(j, "attention_bias", false, source);
  c.qkv_bias = c.model_type == "qwen2" || attention_bias;  // Qwen2 always has q/k/v biases
  c.o_bias = attention_bias;
  c.mlp_bias = optionalBool(j, "mlp_bias", false, source);
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    fail(source, "num_attention_heads (" + std::to_string(c.num_heads) +
                     ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.head_dim = requireInt(j, "head_dim", source);
  } else {
    if (c.hidden_size % c.num_heads != 0) fail(source, "hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail(source, "head_dim must be even for rotary embeddings");
  if (c.rope_scaling.type == RopeScaling::Type::LongRope &&
      (static_cast<int64_t>(c.rope_scaling.short_factor.size()) != c.head_dim / 2 ||
       static_cast<int64_t>(c.rope_scaling.long_factor.size()) != c.head_dim / 2)) {
    fail(source, "rope_scaling 'longrope': short_factor and long_factor need head_dim / 2 = " +
                     std::to_string(c.head_dim / 2) + " entries each");
  }
  parseFamilyDetails(j, c, source);
  const std::string& act = c.activation;
  if (act != "silu" && !(c.family == DecoderFamily::Gemma2 && act == "gelu_pytorch_tanh")) {
    fail(source, "unsupported hidden_act '" + act + "' for " + c.architecture_name +
                     " (supported: silu; gelu_pytorch_tanh for Gemma 2)");
  }
}

}  // namespace

ModelConfig parseModelConfig(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "config is not a JSON object");
  ModelConfig c;
  c.architecture_name = architectureName(j, source);
  c.model_type = optionalString(j, "model_type", "", source);
  if (c.architecture_name == "GPT2LMHeadModel") {
    parseGpt2(j, c, source);
    const std::string& act = c.activation;
    if (act != "gelu_new" && act != "gelu" && act != "relu" && act != "gelu_pytorch_tanh") {
      fail(source, "unsupported activation_function '" + act + "'");
    }
  } else if (c.architecture_name == "LlamaForCausalLM" || c.architecture_name == "Qwen2ForCausalLM" ||
             c.architecture_name == "MistralForCausalLM") {
    if (c.model_type.empty()) c.model_type = c.architecture_name == "Qwen2ForCausalLM" ? "qwen2" : "llama";
    parseLlamaFamily(j, c, source);
  } else if (c.architecture_name == "Qwen3ForCausalLM" || c.architecture_name == "Gemma2ForCausalLM" ||
             c.architecture_name == "Phi3ForCausalLM") {
    c.family = c.architecture_name == "Qwen3ForCausalLM"   ? DecoderFamily::Qwen3
               : c.architecture_name == "Gemma2ForCausalLM" ? DecoderFamily::Gemma2
                                                            : DecoderFamily::Phi3;
    if (c.model_type.empty()) c.model_type = c.family == DecoderFamily::Qwen3 ? "qwen3" : c.family == DecoderFamily::Gemma2 ? "gemma2" : "phi3";
    parseLlamaFamily(j, c, source);
  } else {
    fail(source, "unsupported architecture '" + c.architecture_name + "' (supported: " + kSupported + ")");
  }
  c.bos_token_ids = tokenIdList(j, "bos_token_id", source);
  c.eos_token_ids = tokenIdList(j, "eos_token_id", source);
  checkIdsInVocabulary(c.bos_token_ids, "bos_token_id", c.vocab_size, source);
  checkIdsInVocabulary(c.eos_token_ids, "eos_token_id", c.vocab_size, source);
  return c;
}

// Both files go through the config.json limits (size, depth, numbers that fit
// int64) before any field is read: a stranger's checkpoint may hold anything.
ModelConfig loadModelConfig(const std::string& path) {
  return parseModelConfig(readJsonFileWithLimits(path, kConfigJsonLimits), path);
}

void mergeGenerationConfig(ModelConfig& config, const std::string& path) {
  if (!std::filesystem::exists(path)) return;
  const json j = readJsonFileWithLimits(path, kConfigJsonLimits);
  if (!j.is_object()) fail(path, "not a JSON object");
  auto eos = tokenIdList(j, "eos_token_id", path);
  checkIdsInVocabulary(eos, "eos_token_id", config.vocab_size, path);
  if (!eos.empty()) config.eos_token_ids = eos;
  auto bos = tokenIdList(j, "bos_token_id", path);
  checkIdsInVocabulary(bos, "bos_token_id", config.vocab_size, path);
  if (!bos.empty()) config.bos_token_ids = bos;
}

bool implementedModelType(const std::string& model_type) {
  static const char* const kTypes[] = {"gpt2", "llama", "qwen2", "mistral", "qwen3", "gemma2", "phi3"};
  return std::find(std::begin(kTypes), std::end(kTypes), model_type) != std::end(kTypes);
}

std::string describe(const ModelConfig& c) {
  std::ostringstream out;
  out << c.architecture_name << ": " << c.num_layers << " layers, hidden " << c.hidden_size << ", heads "
      << c.num_heads << "/" << c.num_kv_heads << " (q/kv), head_dim " << c.head_dim << ", mlp "
      << c.intermediate_size << ", vocab " << c.vocab_size << ", context " << c.max_position_embeddings;
  return out.str();
}

}  // namespace kvscope
