#include "core/check/capture_models.h"

#include <torch/types.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace kvscope {
namespace {

std::string differs(const char* field, int64_t captured, int64_t checkpoint) {
  std::ostringstream out;
  out << field << ": the capture says " << captured << ", the checkpoint " << checkpoint;
  return out.str();
}

std::string configMismatch(const CaptureModelConfig& c, const ModelConfig& m, int64_t layers) {
  if (c.model_type && *c.model_type != m.model_type) {
    return "model_type: the capture says " + *c.model_type + ", the checkpoint " + m.model_type;
  }
  const std::pair<const char*, std::pair<std::optional<int64_t>, int64_t>> fields[] = {
      {"num_hidden_layers", {c.num_hidden_layers, m.num_layers}},
      {"num_attention_heads", {c.num_attention_heads, m.num_heads}},
      {"num_key_value_heads", {c.num_key_value_heads, m.num_kv_heads}},
      {"head_dim", {c.head_dim, m.head_dim}},
      {"hidden_size", {c.hidden_size, m.hidden_size}},
      {"vocab_size", {c.vocab_size, m.vocab_size}},
      {"sliding_window", {c.sliding_window.value_or(0), m.sliding_window}},
  };
  for (const auto& [field, values] : fields) {
    if (values.first && *values.first != values.second) return differs(field, *values.first, values.second);
  }
  if (layers != m.num_layers) return differs("layers", layers, m.num_layers);
  return "";
}

// The input embedding as the checkpoint names it.
std::optional<at::Tensor> inputEmbedding(const CausalLM& model) {
  for (const auto& [name, tensor] : model.namedParameters()) {
    if (name == "model.embed_tokens.weight" || name == "transformer.wte.weight") return tensor;
  }
  for (const auto& [name, tensor] : model.namedParameters()) {
    if (name.find("embed_tokens.weight") != std::string::npos || name.find("wte.weight") != std::string::npos) return tensor;
  }
  return std::nullopt;
}

// Elements widened to float64 at a time. The whole embedding widened at once,
// and squared, held 2.2 GB for the 0.5 B shape's 152k x 896 matrix, twice the
// bf16 model `check` had loaded; the sums need one block at a time. A block
// of 2^20 (8 MB in float64, its square as much) stays in malloc's heap and is
// reused: at 2^22 each temporary was 32 MB, at glibc's mmap threshold, and
// every one a fresh mapping faulted in page by page (a quarter of `check` of
// a 0.5 B capture, perf, 2026-11-29).
constexpr int64_t kFingerprintBlockElements = int64_t{1} << 20;

// The inference layout may store the embedding as panels [vocab / 16,
// hidden, 16] (core/model/dense.h): the same values, so the same sums; the
// shape is the config's.
std::optional<CaptureFingerprint> fingerprintOf(const CausalLM& model) {
  const auto embedding = inputEmbedding(model);
  if (!embedding) return std::nullopt;
  c10::InferenceMode guard;
  const at::Tensor flat = embedding->reshape({-1});  // [elements]
  CaptureFingerprint f;
  f.tensor = "input_embeddings";
  f.shape = {model.config().vocab_size, model.config().hidden_size};
  for (const at::Tensor& block : flat.split(kFingerprintBlockElements)) {
    const at::Tensor wide = block.to(torch::kFloat64);  // [block]
    f.sum += wide.sum().item<double>();
    f.sum_squares += wide.square().sum().item<double>();  // not dot(): OpenBLAS threads of its own spin against ours
  }
  return f;
}

std::string fingerprintMismatch(const CaptureFingerprint& f, const CausalLM& model) {
  const auto mine = fingerprintOf(model);
  if (!mine) return "the checkpoint has no input embedding to compare the capture's fingerprint with";
  if (mine->shape != f.shape) return "the input embedding's shape differs from the capture's fingerprint";
  const double sum = mine->sum, sum_squares = mine->sum_squares;
  const double count = static_cast<double>(mine->shape[0] * mine->shape[1]);
  const bool squares_match = std::abs(sum_squares - f.sum_squares) <= 1e-3 * f.sum_squares;
  const bool sum_matches = std::abs(sum - f.sum) <= 1e-3 * std::sqrt(count * f.sum_squares);
  if (squares_match && sum_matches) return "";
  std::ostringstream out;
  out << "the input embeddings differ (sum of squares " << f.sum_squares << " in the capture, " << sum_squares
      << " in the checkpoint): another checkpoint";
  return out.str();
}

}  // namespace

CaptureModel describeCaptureModel(CaptureRole role, const std::string& name_or_path, const CausalLM& model) {
  const ModelConfig& m = model.config();
  CaptureModel d;
  d.role = role;
  d.name_or_path = name_or_path;
  d.config.model_type = m.model_type;
  d.config.num_hidden_layers = m.num_layers;
  d.config.num_attention_heads = m.num_heads;
  d.config.num_key_value_heads = m.num_kv_heads;
  d.config.head_dim = m.head_dim;
  d.config.hidden_size = m.hidden_size;
  d.config.vocab_size = m.vocab_size;
  if (m.sliding_window > 0) {
    d.config.sliding_window = m.sliding_window;
    d.config.sliding_layers = m.sliding_layers;
  }
  d.fingerprint = fingerprintOf(model);
  d.layers = m.num_layers;
  return d;
}

std::string captureModelMismatch(const CaptureModel& captured, const CausalLM& model) {
  const std::string config = configMismatch(captured.config, model.config(), captured.layers);
  if (!config.empty()) return config;
  return captured.fingerprint ? fingerprintMismatch(*captured.fingerprint, model) : "";
}

std::optional<std::string> namedModelDirectory(const CaptureFile& file, CaptureRole role) {
  const CaptureModel* model = file.manifest().model(role);
  if (model == nullptr || model->name_or_path.empty()) return std::nullopt;
  const std::filesystem::path named(model->name_or_path);
  for (const std::filesystem::path& candidate : {named, std::filesystem::path(file.path()).parent_path() / named}) {
    std::error_code error;
    if (std::filesystem::is_regular_file(candidate / "config.json", error)) return candidate.string();
  }
  return std::nullopt;
}

ModelBundle loadCaptureModel(const std::string& dir, const CaptureModel& captured, const c10::TensorOptions& options,
                             WeightResidency weights) {
  ModelBundle bundle = loadModelBundle(dir, options, weights);
  const std::string mismatch = captureModelMismatch(captured, *bundle.model);
  if (!mismatch.empty()) {
    throw Error(dir + " is not the " + captureRoleName(captured.role) + " this capture ran (" + captured.name_or_path +
                "): " + mismatch);
  }
  return bundle;
}

}  // namespace kvscope
