#include "core/compress/prefill_compression.h"

#include <string>
#include <utility>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

void CompressionSpec::validate() const {
  if (eviction) eviction->validate();
  if (pruning) pruning->validate();
}

CompressionSpec CompressionSpec::evicting(EvictionPolicy policy, double fraction) {
  CompressionSpec spec;
  spec.eviction = EvictionSettings{};
  spec.eviction->policy = policy;
  spec.eviction->budget.fraction = fraction;
  return spec;
}

void checkCompressible(const ModelConfig& config, const CompressionSpec& spec) {
  spec.validate();
  if (!spec.eviction) return;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    require(config.windowOf(l) <= 0, "compress: token eviction on a model with sliding-window layers (layer " +
                                         std::to_string(l) + ") is not supported yet; element pruning is");
  }
}

std::vector<Probe> compressionEvidence(const CompressionSpec& spec) {
  std::vector<Probe> points;
  const bool output_aware = spec.pruning && spec.pruning->score == ElementScore::OutputAware;
  if ((spec.eviction && needsAttention(spec.eviction->policy)) || output_aware) points.push_back(Probe::AttentionWeights);
  if (output_aware) points.push_back(Probe::Query);
  return points;
}

CompressionRequest compressionRequest(const CompressionSpec& spec, const ProbeRecorder& evidence) {
  CompressionRequest request;
  request.eviction = spec.eviction;
  request.pruning = spec.pruning;
  request.attention = evidence.perLayer(Probe::AttentionWeights);  // [heads, n, T] per layer
  if (spec.pruning) request.queries = evidence.perLayer(Probe::Query);  // [heads, n, D] per layer
  return request;
}

std::string compressionEventName(const CompressionSpec& spec) {
  std::string name = spec.eviction ? evictionPolicyName(spec.eviction->policy) : "";
  if (spec.eviction && spec.eviction->demote_bits > 0) name += " (demoted to " + std::to_string(spec.eviction->demote_bits) + " bits)";
  if (spec.pruning) name += std::string(name.empty() ? "" : " + ") + "element pruning";
  return name;
}

PrefillCompression compressPrefilled(KvCache& cache, const CompressionSpec& spec, const ProbeRecorder& evidence) {
  return compressCache(cache, compressionRequest(spec, evidence));
}

PrefillCompression prefillAndCompress(const CausalLM& model, const at::Tensor& tokens, KvCache& cache,
                                      const CompressionSpec& spec) {
  checkCompressible(model.config(), spec);
  ProbeRecorder evidence(compressionEvidence(spec));
  model.forward(tokens, 0, &cache, &evidence, 0);
  return compressPrefilled(cache, spec, evidence);
}

}  // namespace kvscope
