#pragma once
// A causal language model (GPT-2 or Llama family) with an explicit-position
// forward that feeds only the tokens not yet in the cache.
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include "core/cache/block_pool.h"
#include "core/cache/kv_cache.h"
#include "core/model/batch_rows.h"
#include "core/model/model_config.h"
#include "core/model/probe.h"
#include "core/model/weight_residency.h"

namespace kvscope {

// A parameter as the checkpoint names it.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  const ModelConfig& config() const { return config_; }
  const c10::TensorOptions& options() const { return options_; }
  // Where the weights came from (the model directory), for error messages.
  const std::string& source() const { return source_; }
  void setSource(std::string source) { source_ = std::move(source); }

  // tokens: [n] int64 ids at positions start_pos .. start_pos + n - 1.
  // With a cache, its length must equal start_pos (it holds exactly the
  // tokens before these); the forward appends n rows to every layer.
  // Without a cache, start_pos must be 0 and tokens is the whole sequence.
  // Throws Error when the logits hold NaN or Inf, naming the layer where
  // values first became non-finite and the config fields involved; the
  // cache is then left as the call found it (no row of this forward kept).
  // Returns logits [n, vocab] in the compute dtype, or of only the last
  // `logit_rows` tokens ([logit_rows, vocab]) when that is >= 0: a prefill
  // needs none, a decode step one, and the head of a 150k-token vocabulary
  // over a 2,000-token prompt would cost 1.2 GB and most of the prefill's time.
  static constexpr int64_t kAllRows = -1;
  at::Tensor forward(const at::Tensor& tokens, int64_t start_pos, KvCache* cache, ProbeSink* probes = nullptr,
                     int64_t logit_rows = kAllRows) const;
  // As forward(), but the cache's length need not equal start_pos (ids and
  // positions are still checked). Only fault injection uses it, to reproduce
  // engines that lose track of what their cache holds.
  at::Tensor forwardUnchecked(const at::Tensor& tokens, int64_t start_pos, KvCache* cache,
                              ProbeSink* probes = nullptr, int64_t logit_rows = kAllRows) const;

  // One forward of several sequences (core/model/batch_rows.h), each with its
  // own tokens, positions, cache, probes and logit rows, checked as forward()
  // (or, with `unchecked`, forwardUnchecked()) checks one. Per sequence: its
  // logits [logit rows, vocab], or the error its forward alone would have
  // thrown; a sequence that fails leaves its cache as the call found it and
  // the others keep their rows. A batch of one is forward() itself.
  struct SequenceResult {
    at::Tensor logits;
    std::exception_ptr error;
  };
  std::vector<SequenceResult> forwardBatch(const std::vector<SequenceForward>& sequences) const;

  // An empty cache shaped for this model, storing K/V in `storage` dtype
  // (default: the compute dtype).
  std::unique_ptr<KvCache> makeCache(c10::optional<c10::ScalarType> storage = c10::nullopt) const;
  // An empty pool of `block_size`-row blocks shaped for this model, which
  // several sequences' paged caches share (KvCache(pool, sequence)).
  std::shared_ptr<BlockPool> makeBlockPool(int64_t block_size,
                                           c10::optional<c10::ScalarType> storage = c10::nullopt) const;

  // Parameters under their checkpoint names (tied weights listed once).
  virtual NamedTensors namedParameters() const = 0;
  // Re-stores the dense weights for inference (same values and shapes; see
  // columnMajor in core/model/dense.h). loadCausalLM loads them in this
  // layout directly; training keeps the layout its optimiser was built on.
  virtual void layOutForInference() = 0;
  int64_t parameterCount() const;

 protected:
  CausalLM(ModelConfig config, c10::TensorOptions options)
      : config_(std::move(config)), options_(options) {}
  // Architecture-specific body; arguments already checked. Returns the
  // logits of every sequence's logit rows, in batch order: [sum of logit
  // rows, vocab] (BatchRows::splitLogits parts them).
  virtual at::Tensor forwardImpl(const BatchRows& batch) const = 0;

  ModelConfig config_;
  c10::TensorOptions options_;
  std::string source_;

 private:
  void checkForwardArguments(const SequenceForward& sequence) const;
  // The rows each layer of a sequence's cache holds (empty without a cache).
  static std::vector<int64_t> rowsBefore(const SequenceForward& sequence);
  // Runs the sequence's forward again on a copy of its cache as it was
  // before (each layer cut back to rows_before), watching every probe point,
  // and throws Error naming the layer and step where values first became
  // non-finite.
  [[noreturn]] void refuseNonFinite(const SequenceForward& sequence, const std::vector<int64_t>& rows_before) const;
  // Checks one sequence's logits; on NaN or Inf, the error refuseNonFinite
  // gives, with the sequence's cache cut back to rows_before.
  std::exception_ptr finiteOrError(const SequenceForward& sequence, const at::Tensor& logits,
                                   const std::vector<int64_t>& rows_before) const;
};

// The parameters an architecture expects, with shapes, under HF names.
std::vector<TensorSpec> expectedTensors(const ModelConfig& config);

// How many parameters a model of `config` has, counted from the shapes
// alone (nothing allocated). A double: a config within the field limits can
// ask for more than 2^63 (4096 layers of 2^52-element projections); exact
// up to 2^53, far beyond any model that fits in memory.
double parameterCountOf(const ModelConfig& config);

// Builds a model of config's architecture from named tensors (HF names).
// Throws Error naming a missing tensor or a shape mismatch.
std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, const NamedTensors& tensors,
                                        const c10::TensorOptions& options, const std::string& source);

// Loads config.json (+ generation_config.json) and the safetensors weights of
// a Hugging Face directory. options: the compute dtype and device. weights:
// whether bfloat16 / float16 dense weights stay so (Stored; with a float32
// compute dtype on a CPU the few-row kernel runs on) or are widened to the
// compute dtype (core/model/weight_residency.h).
std::unique_ptr<CausalLM> loadCausalLM(const std::string& dir, const c10::TensorOptions& options,
                                       WeightResidency weights = WeightResidency::Stored);

// Bytes the model's parameters hold in memory (tied weights once), by dtype
// as c10 names it ("Float", "BFloat16", "Half").
std::map<std::string, int64_t> residentBytesByDtype(const CausalLM& model);

}  // namespace kvscope
