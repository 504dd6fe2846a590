#include "core/model/causal_lm.h"

#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/model/checkpoint.h"
#include "core/model/dense.h"
#include "core/model/gpt2_model.h"
#include "core/model/llama_model.h"

namespace kvscope {
namespace {

std::string shapeString(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Buffers HF checkpoints may carry that are not parameters.
bool isIgnoredBuffer(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias") || ends_with("rotary_emb.inv_freq");
}

// GPT-2 checkpoints are saved with or without the "transformer." prefix.
std::string storedName(const Checkpoint& ckpt, const std::string& canonical) {
  if (ckpt.has(canonical)) return canonical;
  const std::string prefix = "transformer.";
  if (canonical.rfind(prefix, 0) == 0 && ckpt.has(canonical.substr(prefix.size()))) {
    return canonical.substr(prefix.size());
  }
  return canonical;
}

}  // namespace

void CausalLM::checkForwardArguments(const at::Tensor& tokens, int64_t start_pos, const KvCache* cache,
                                     bool require_cache_at_start) const {
  require(tokens.dim() == 1 && tokens.scalar_type() == torch::kInt64, "forward: tokens must be a 1-D int64 tensor");
  const int64_t n = tokens.size(0);
  require(n > 0, "forward: no tokens to feed");
  if (cache == nullptr) {
    require(start_pos == 0, "forward without a cache recomputes the whole sequence: start_pos must be 0, got " +
                                std::to_string(start_pos));
  } else if (require_cache_at_start) {
    for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
      require(cache->endPosition(layer) == start_pos,
              "forward: layer " + std::to_string(layer) + " of the cache holds positions up to " +
                  std::to_string(cache->endPosition(layer)) + " but the tokens start at position " +
                  std::to_string(start_pos));
    }
  }
  if (start_pos + n > config_.contextLength()) {
    throw Error("forward: a sequence of " + std::to_string(start_pos + n) + " tokens exceeds the context length " +
                std::to_string(config_.contextLength()) + " of " + config_.architecture_name);
  }
  const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  if (lo < 0 || hi >= config_.vocab_size) {
    const int64_t bad = lo < 0 ? lo : hi;
    throw Error("forward: token id " + std::to_string(bad) + " is outside the vocabulary (size " +
                std::to_string(config_.vocab_size) + ")");
  }
}

at::Tensor CausalLM::forward(const at::Tensor& tokens, int64_t start_pos, KvCache* cache, ProbeSink* probes,
                             int64_t logit_rows) const {
  checkForwardArguments(tokens, start_pos, cache, /*require_cache_at_start=*/true);
  shareThreadsBeforeForward();  // this thread's share of the process's threads
  return forwardImpl(tokens, start_pos, cache, probes, logit_rows);
}

at::Tensor CausalLM::forwardUnchecked(const at::Tensor& tokens, int64_t start_pos, KvCache* cache,
                                      ProbeSink* probes, int64_t logit_rows) const {
  checkForwardArguments(tokens, start_pos, cache, /*require_cache_at_start=*/false);
  shareThreadsBeforeForward();
  return forwardImpl(tokens, start_pos, cache, probes, logit_rows);
}

at::Tensor CausalLM::rowsForLogits(const at::Tensor& x, int64_t logit_rows) {
  const int64_t n = x.size(0);
  if (logit_rows < 0 || logit_rows >= n) return x;
  return x.narrow(0, n - logit_rows, logit_rows);  // [logit_rows, hidden]
}

std::unique_ptr<KvCache> CausalLM::makeCache(c10::optional<c10::ScalarType> storage) const {
  auto storage_options = options_.dtype(storage.value_or(options_.dtype().toScalarType()));
  return std::make_unique<KvCache>(config_.num_layers, config_.num_kv_heads, config_.head_dim, storage_options);
}

int64_t CausalLM::parameterCount() const {
  int64_t total = 0;
  for (const auto& entry : namedParameters()) total += entry.second.numel();
  return total;
}

std::vector<TensorSpec> expectedTensors(const ModelConfig& config) {
  return config.arch == Architecture::Gpt2 ? Gpt2Model::expectedTensors(config)
                                           : LlamaModel::expectedTensors(config);
}

static bool packedForInference(const ModelConfig& config, const TensorSpec& spec) {
  return config.arch == Architecture::Gpt2 ? Gpt2Model::packedForInference(config, spec)
                                           : LlamaModel::packedForInference(config, spec);
}

std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, const NamedTensors& tensors,
                                        const c10::TensorOptions& options, const std::string& source) {
  std::map<std::string, at::Tensor> weights(tensors.begin(), tensors.end());
  for (const TensorSpec& spec : expectedTensors(config)) {
    auto it = weights.find(spec.name);
    if (it == weights.end()) fail(source, "missing tensor '" + spec.name + "'");
    // Logical shapes: a weight loaded for inference may be stored as panels.
    const std::vector<int64_t> shape = denseShape(it->second);
    if (shape != spec.shape) {
      fail(source, "tensor '" + spec.name + "' has shape " + shapeString(shape) + ", config.json implies " +
                       shapeString(spec.shape));
    }
  }
  if (config.arch == Architecture::Gpt2) return std::make_unique<Gpt2Model>(config, weights, options);
  return std::make_unique<LlamaModel>(config, weights, options);
}

std::unique_ptr<CausalLM> loadCausalLM(const std::string& dir, const c10::TensorOptions& options) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(dir, "not a directory");
  ModelConfig config = loadModelConfig((fs::path(dir) / "config.json").string());
  mergeGenerationConfig(config, (fs::path(dir) / "generation_config.json").string());
  const Checkpoint ckpt = Checkpoint::open(dir);

  NamedTensors tensors;
  std::set<std::string> used;
  for (const TensorSpec& spec : expectedTensors(config)) {
    const std::string stored = storedName(ckpt, spec.name);
    if (!ckpt.has(stored)) fail(dir, "missing tensor '" + spec.name + "'");
    tensors.emplace_back(spec.name, ckpt.load(stored, options, packedForInference(config, spec)));
    used.insert(stored);
  }
  for (const std::string& name : ckpt.names()) {
    if (!used.count(name) && !isIgnoredBuffer(name) && name != "lm_head.weight") {
      spdlog::warn("{}: tensor '{}' is not used by {}", dir, name, config.architecture_name);
    }
  }
  // Loaded in the layout layOutForInference would give (InferenceLayoutTest
  // checks they agree), so no weight is re-stored and none exists twice.
  return buildCausalLM(config, tensors, options, dir);
}

}  // namespace kvscope
