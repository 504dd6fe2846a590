#include "core/model/causal_lm.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/runtime/allocator_tuning.h"
#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/model/checkpoint.h"
#include "core/model/dense.h"
#include "core/model/few_rows.h"
#include "core/model/finite_logits.h"
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

// "model.layers.7.mlp.up_proj.weight" -> 7; -1 for tensors outside the layers.
int64_t layerIndexOf(const std::string& name) {
  for (const std::string prefix : {"model.layers.", "transformer.h.", "h."}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t end = name.find('.', prefix.size());
    const std::string digits = name.substr(prefix.size(), end - prefix.size());
    if (!digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos)
      return std::stoll(digits);
  }
  return -1;
}

// Checkpoint tensors the config does not account for are an error: a
// config.json with 2 layers over a 24-layer checkpoint would otherwise run
// a different, truncated model and say nothing.
void refuseUnusedTensors(const Checkpoint& ckpt, const std::set<std::string>& used, const ModelConfig& config,
                         const std::string& dir) {
  std::vector<std::string> unused;
  int64_t deepest = -1;
  for (const std::string& name : ckpt.names()) {
    if (used.count(name) || isIgnoredBuffer(name) || name == "lm_head.weight") continue;
    unused.push_back(name);
    deepest = std::max(deepest, layerIndexOf(name));
  }
  if (unused.empty()) return;
  constexpr size_t kShown = 5;
  std::string list;
  for (size_t i = 0; i < std::min(unused.size(), kShown); ++i) list += (i ? ", '" : "'") + unused[i] + "'";
  if (unused.size() > kShown) list += ", ... (" + std::to_string(unused.size()) + " in all)";
  std::string hint;
  if (deepest >= config.num_layers) {
    hint = "; the checkpoint has layers up to " + std::to_string(deepest) + " but config.json says " +
           std::to_string(config.num_layers) + " (num_hidden_layers / n_layer)";
  }
  fail(dir, "tensors that config.json does not account for (" + config.architecture_name + "): " + list + hint);
}

// The options a checkpoint tensor is loaded with: its stored bfloat16 /
// float16 for a dense weight when the weights stay as stored and the kernel
// can widen them (a float32 compute dtype, a CPU with AVX2 or AVX-512, whole
// 16-column vectors), else the compute options. packed: a multiplied
// [out, in] weight, laid out as panels; the other 2-D tensors are read along
// their second axis (embeddings, position tables, GPT-2's Conv1D [in, out]).
c10::TensorOptions residentOptions(const StTensorInfo& info, const TensorSpec& spec, bool packed,
                                   const c10::TensorOptions& options, WeightResidency weights) {
  if (weights != WeightResidency::Stored || options.dtype() != torch::kFloat32 || !options.device().is_cpu()) return options;
  if (spec.shape.size() != 2 || !fewRowsCpuSupported()) return options;
  if (info.dtype != StDType::BF16 && info.dtype != StDType::F16) return options;
  const int64_t width = packed ? spec.shape[0] : spec.shape[1];
  if (width % kPanelWidth != 0) return options;
  return options.dtype(info.dtype == StDType::BF16 ? torch::kBFloat16 : torch::kFloat16);
}

}  // namespace

namespace {

// The smallest and largest id of a 1-D int64 tensor: a plain loop over a
// contiguous one (a drafter's single token), else torch's min and max.
std::pair<int64_t, int64_t> tokenRange(const at::Tensor& tokens) {
  if (!tokens.is_contiguous() || !tokens.device().is_cpu()) {
    return {tokens.min().item<int64_t>(), tokens.max().item<int64_t>()};
  }
  const int64_t* ids = tokens.data_ptr<int64_t>();
  const auto [lo, hi] = std::minmax_element(ids, ids + tokens.numel());
  return {*lo, *hi};
}

}  // namespace

void CausalLM::checkForwardArguments(const SequenceForward& sequence) const {
  const at::Tensor& tokens = sequence.tokens;
  const int64_t start_pos = sequence.start_pos;
  const KvCache* cache = sequence.cache;
  require(tokens.defined() && tokens.dim() == 1 && tokens.scalar_type() == torch::kInt64,
          "forward: tokens must be a 1-D int64 tensor");
  const int64_t n = tokens.size(0);
  require(n > 0, "forward: no tokens to feed");
  if (cache == nullptr) {
    require(start_pos == 0, [&] {
      return "forward without a cache recomputes the whole sequence: start_pos must be 0, got " +
             std::to_string(start_pos);
    });
  } else if (!sequence.unchecked) {
    for (int64_t layer = 0; layer < cache->numLayers(); ++layer) {
      require(cache->endPosition(layer) == start_pos, [&] {
        return "forward: layer " + std::to_string(layer) + " of the cache holds positions up to " +
               std::to_string(cache->endPosition(layer)) + " but the tokens start at position " +
               std::to_string(start_pos);
      });
    }
  }
  require(sequence.pads.before >= 0 && sequence.pads.after >= 0 && sequence.realCount() > 0, [&] {
    return "forward: the pads of a padded forward must leave at least one real token among its " + std::to_string(n);
  });
  const int64_t end = start_pos + sequence.realCount();  // pads hold no position
  if (end > config_.contextLength()) {
    throw Error("forward: a sequence of " + std::to_string(end) + " tokens exceeds the context length " +
                std::to_string(config_.contextLength()) + " of " + config_.architecture_name);
  }
  const auto [lo, hi] = tokenRange(tokens);
  if (lo < 0 || hi >= config_.vocab_size) {
    const int64_t bad = lo < 0 ? lo : hi;
    throw Error("forward: token id " + std::to_string(bad) + " is outside the vocabulary (size " +
                std::to_string(config_.vocab_size) + ")");
  }
}

at::Tensor CausalLM::forward(const at::Tensor& tokens, int64_t start_pos, KvCache* cache, ProbeSink* probes,
                             int64_t logit_rows) const {
  SequenceResult result = forwardBatch({{tokens, start_pos, cache, probes, logit_rows, /*unchecked=*/false, /*pads=*/{}, /*padding_out=*/nullptr}}).front();
  if (result.error) std::rethrow_exception(result.error);
  return result.logits;
}

at::Tensor CausalLM::forwardUnchecked(const at::Tensor& tokens, int64_t start_pos, KvCache* cache,
                                      ProbeSink* probes, int64_t logit_rows) const {
  SequenceResult result = forwardBatch({{tokens, start_pos, cache, probes, logit_rows, /*unchecked=*/true, /*pads=*/{}, /*padding_out=*/nullptr}}).front();
  if (result.error) std::rethrow_exception(result.error);
  return result.logits;
}

std::vector<CausalLM::SequenceResult> CausalLM::forwardBatch(const std::vector<SequenceForward>& sequences) const {
  std::vector<SequenceResult> results(sequences.size());
  std::vector<SequenceForward> runnable;  // the sequences whose arguments hold, in order
  std::vector<size_t> runnable_index;
  for (size_t i = 0; i < sequences.size(); ++i) {
    try {
      checkForwardArguments(sequences[i]);
      runnable.push_back(sequences[i]);
      runnable_index.push_back(i);
    } catch (...) {
      results[i].error = std::current_exception();
    }
  }
  if (runnable.empty()) return results;
  std::vector<std::vector<int64_t>> rows_before;  // per sequence, per layer; a fault may write fewer rows than it feeds
  for (const SequenceForward& s : runnable) rows_before.push_back(rowsBefore(s));
  shareThreadsBeforeForward();  // this thread's share of the process's threads
  const BatchRows batch(runnable);
  const std::vector<at::Tensor> logits = batch.splitLogits(forwardImpl(batch));
  for (size_t r = 0; r < runnable.size(); ++r) {
    SequenceResult& result = results[runnable_index[r]];
    result.error = finiteOrError(runnable[r], logits[r], rows_before[r]);
    if (!result.error) result.logits = logits[r];
  }
  return results;
}

std::vector<int64_t> CausalLM::rowsBefore(const SequenceForward& sequence) {
  std::vector<int64_t> rows;
  if (sequence.cache == nullptr) return rows;
  rows.reserve(static_cast<size_t>(sequence.cache->numLayers()));
  for (int64_t layer = 0; layer < sequence.cache->numLayers(); ++layer) rows.push_back(sequence.cache->length(layer));
  return rows;
}

std::exception_ptr CausalLM::finiteOrError(const SequenceForward& sequence, const at::Tensor& logits,
                                           const std::vector<int64_t>& rows_before) const {
  if (!finiteGuardEnabled() || allFinite(logits)) return nullptr;
  try {
    refuseNonFinite(sequence, rows_before);
  } catch (const Error&) {
    // Drop the rows this forward appended: a session that shows the error
    // and stays open must be able to step again from where it was.
    KvCache* cache = sequence.cache;
    for (int64_t layer = 0; cache != nullptr && layer < cache->numLayers(); ++layer)
      cache->cropLayer(layer, rows_before[static_cast<size_t>(layer)]);
    return std::current_exception();
  }
  return nullptr;  // unreachable: refuseNonFinite always throws
}

void CausalLM::refuseNonFinite(const SequenceForward& sequence, const std::vector<int64_t>& rows_before) const {
  FirstNonFinite site;
  bool stale_cache = false;
  SequenceForward rerun_forward = sequence;
  rerun_forward.probes = &site;
  if (sequence.cache == nullptr) {
    forwardImpl(BatchRows({rerun_forward}));
  } else {
    KvCache rerun = sequence.cache->clone();
    for (int64_t layer = 0; layer < rerun.numLayers(); ++layer) rerun.cropLayer(layer, rows_before[static_cast<size_t>(layer)]);
    rerun_forward.cache = &rerun;
    forwardImpl(BatchRows({rerun_forward}));
    // Attention that read non-finite rows written earlier (by a prefill that
    // computed no logits, so nothing checked it then).
    const bool reads_cache = site.point() == Probe::AttentionWeights || site.point() == Probe::AttentionOutput;
    if (site.found() && reads_cache) {
      const int64_t rows = rows_before[static_cast<size_t>(site.layer())];
      stale_cache = rows > 0 && !(allFinite(rerun.keys(site.layer()).narrow(1, 0, rows)) &&
                                  allFinite(rerun.values(site.layer()).narrow(1, 0, rows)));
    }
  }
  throw Error((source_.empty() ? config_.architecture_name : source_) + ": forward of " +
              std::to_string(sequence.tokens.size(0)) + " token(s) at position " + std::to_string(sequence.start_pos) +
              " gave non-finite logits (NaN or Inf): " + describeNonFinite(config_, site, stale_cache));
}

std::unique_ptr<KvCache> CausalLM::makeCache(c10::optional<c10::ScalarType> storage) const {
  auto storage_options = options_.dtype(storage.value_or(options_.dtype().toScalarType()));
  return std::make_unique<KvCache>(config_.num_layers, config_.num_kv_heads, config_.head_dim, storage_options);
}

std::shared_ptr<BlockPool> CausalLM::makeBlockPool(int64_t block_size, c10::optional<c10::ScalarType> storage) const {
  auto storage_options = options_.dtype(storage.value_or(options_.dtype().toScalarType()));
  const BlockPoolShape shape{config_.num_layers, config_.num_kv_heads, config_.head_dim, block_size};
  return std::make_shared<BlockPool>(shape, storage_options);
}

std::map<std::string, int64_t> residentBytesByDtype(const CausalLM& model) {
  std::map<std::string, int64_t> bytes;
  for (const auto& [name, tensor] : model.namedParameters())
    bytes[c10::toString(tensor.scalar_type())] += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes;
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

double parameterCountOf(const ModelConfig& config) {
  double total = 0;
  for (const TensorSpec& spec : expectedTensors(config)) {
    double elements = 1;
    for (int64_t extent : spec.shape) elements *= static_cast<double>(extent);
    total += elements;
  }
  return total;
}

static bool packedForInference(const ModelConfig& config, const TensorSpec& spec) {
  return config.arch == Architecture::Gpt2 ? Gpt2Model::packedForInference(config, spec)
                                           : LlamaModel::packedForInference(config, spec);
}

namespace {

// The options one group member loads with when it can share a fused panel
// tensor: stored as its spec says and packed into panels. Else none.
std::optional<c10::TensorOptions> panelOptions(const Checkpoint& ckpt, const ModelConfig& config, const TensorSpec& spec,
                                               const c10::TensorOptions& options, WeightResidency weights) {
  const std::string stored = storedName(ckpt, spec.name);
  if (!ckpt.has(stored) || ckpt.info(stored).shape != spec.shape || !packedForInference(config, spec)) return {};
  const c10::TensorOptions resident = residentOptions(ckpt.info(stored), spec, /*packed=*/true, options, weights);
  if (!packsIntoPanels(spec.shape[0], spec.shape[1], resident.dtype().toScalarType())) return {};
  return resident;
}

// One tensor [sum P_i, in, 16] for each group of weights fuseProjections
// joins (LlamaModel::fusedTensorGroups) whose parts all load as panels of one
// dtype and width; returned as each part's slice of it, by name. Read
// straight into their slices, the parts are adopted as the fused tensor
// instead of being copied into one: half of a 16-bit model, a seventh of the
// 0.5 B shape's load. Other groups (a stored shape that is wrong, mixed
// dtypes, float32 weights) load part by part, and the shape check names them.
std::map<std::string, at::Tensor> fusedDestinations(const ModelConfig& config, const Checkpoint& ckpt,
                                                    const c10::TensorOptions& options, WeightResidency weights) {
  std::map<std::string, at::Tensor> slices;
  if (config.arch == Architecture::Gpt2) return slices;
  std::map<std::string, TensorSpec> specs;
  for (const TensorSpec& spec : expectedTensors(config)) specs.emplace(spec.name, spec);
  for (const std::vector<std::string>& group : LlamaModel::fusedTensorGroups(config)) {
    std::optional<c10::TensorOptions> common;
    int64_t panels = 0;
    bool fits = true;
    for (const std::string& name : group) {
      const TensorSpec& spec = specs.at(name);
      const std::optional<c10::TensorOptions> part = panelOptions(ckpt, config, spec, options, weights);
      fits = part && (!common || part->dtype() == common->dtype()) && spec.shape[1] == specs.at(group[0]).shape[1];
      if (!fits) break;
      common = part;
      panels += spec.shape[0] / kPanelWidth;
    }
    if (!fits) continue;
    const int64_t in = specs.at(group[0]).shape[1];
    at::Tensor fused = at::empty({panels, in, kPanelWidth}, *common);  // [sum P_i, in, 16]
    adviseHugePages(fused.data_ptr(), fused.nbytes());
    int64_t first = 0;
    for (const std::string& name : group) {
      const int64_t count = specs.at(name).shape[0] / kPanelWidth;
      slices.emplace(name, fused.narrow(0, first, count));
      first += count;
    }
  }
  return slices;
}

// buildCausalLM on tensors it owns: the model takes each one over, so a part
// it re-stores (fused projections) is freed at once instead of being held
// by the caller until the whole model is built (a 0.5 B model in bfloat16,
// every layer fused: 1.59 GB peak instead of 1.2).
std::unique_ptr<CausalLM> buildOwned(const ModelConfig& config, NamedTensors&& tensors,
                                     const c10::TensorOptions& options, const std::string& source) {
  std::map<std::string, at::Tensor> weights;
  for (auto& [name, tensor] : tensors) weights.emplace(name, std::move(tensor));
  tensors.clear();
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
  std::unique_ptr<CausalLM> model;
  if (config.arch == Architecture::Gpt2) model = std::make_unique<Gpt2Model>(config, weights, options);
  else model = std::make_unique<LlamaModel>(config, std::move(weights), options);
  model->setSource(source);
  return model;
}

}  // namespace

std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, const NamedTensors& tensors,
                                        const c10::TensorOptions& options, const std::string& source) {
  return buildOwned(config, NamedTensors(tensors), options, source);
}

std::unique_ptr<CausalLM> loadCausalLM(const std::string& dir, const c10::TensorOptions& options,
                                       WeightResidency weights) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(dir, "not a directory");
  ModelConfig config = loadModelConfig((fs::path(dir) / "config.json").string());
  mergeGenerationConfig(config, (fs::path(dir) / "generation_config.json").string());
  const Checkpoint ckpt = Checkpoint::open(dir);

  NamedTensors tensors;
  std::set<std::string> used;
  std::map<std::string, at::Tensor> fused_slices = fusedDestinations(config, ckpt, options, weights);
  for (const TensorSpec& spec : expectedTensors(config)) {
    const std::string stored = storedName(ckpt, spec.name);
    if (!ckpt.has(stored)) fail(dir, "missing tensor '" + spec.name + "'");
    const bool packed = packedForInference(config, spec);
    auto slice = fused_slices.find(spec.name);
    if (slice != fused_slices.end()) {
      ckpt.loadInto(stored, slice->second);
      tensors.emplace_back(spec.name, std::move(slice->second));
    } else {
      tensors.emplace_back(spec.name,
                           ckpt.load(stored, residentOptions(ckpt.info(stored), spec, packed, options, weights), packed));
    }
    used.insert(stored);
  }
  fused_slices.clear();  // the model holds the fused tensors through its parts
  refuseUnusedTensors(ckpt, used, config, dir);
  // Loaded in the layout layOutForInference would give (InferenceLayoutTest
  // checks they agree), so no weight is re-stored and none exists twice.
  return buildOwned(config, std::move(tensors), options, dir);
}

}  // namespace kvscope
