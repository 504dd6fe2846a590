#pragma once
// A prefill followed by compression of its cache, shared by the compression
// lab and compressed-cache self-speculation (whose drafter compresses its
// tracked cache after the session's prefill, core/compress/self_speculation_drafter.h):
// the forward records what the policies score with (attention weights,
// queries), then eviction and/or element pruning act on the cache (a tracked
// cache's through TrackedCache::compress, which logs them).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/cache/cache_compression.h"
#include "core/model/causal_lm.h"
#include "core/model/probe_recorder.h"

namespace kvscope {

struct CompressionSpec {
  std::optional<EvictionSettings> eviction;  // token eviction, after the prefill (tova: also every step)
  std::optional<PruneSettings> pruning;      // element pruning, once after the prefill

  // Token eviction alone: `policy` at a budget of `fraction` of the rows,
  // every other setting at its default (the sweeps and the tests).
  static CompressionSpec evicting(EvictionPolicy policy, double fraction);

  // Throws Error for bad settings (naming the option and its range).
  void validate() const;
};

// What a prefill's compression did (core/cache/cache_compression.h).
using PrefillCompression = CompressionOutcome;

// Throws Error for bad settings (naming the option and its range), or for
// token eviction on a model with sliding-window layers (not supported yet).
void checkCompressible(const ModelConfig& config, const CompressionSpec& spec);

// The probe points a prefill must record for spec's policies to score with.
std::vector<Probe> compressionEvidence(const CompressionSpec& spec);

// The compression spec asks for, scoring with what the prefill forward
// recorded into `evidence` (a ProbeRecorder of compressionEvidence(spec)):
// what TrackedCache::compress and compressPrefilled take.
CompressionRequest compressionRequest(const CompressionSpec& spec, const ProbeRecorder& evidence);

// The name a compression's Evict event carries: "h2o", "h2o (demoted to 8
// bits) + element pruning", "element pruning".
std::string compressionEventName(const CompressionSpec& spec);

// Compresses an untracked cache just prefilled (rows at positions 0..n-1 in
// every layer) as spec says (compressCache of compressionRequest).
PrefillCompression compressPrefilled(KvCache& cache, const CompressionSpec& spec, const ProbeRecorder& evidence);

// Feeds tokens ([n] ids at positions 0..n-1) into the empty `cache` and
// compresses it as `spec` says. Throws Error as checkCompressible.
PrefillCompression prefillAndCompress(const CausalLM& model, const at::Tensor& tokens, KvCache& cache,
                                      const CompressionSpec& spec);

}  // namespace kvscope
