#pragma once
// The drafter of compressed-cache self-speculation (the idea behind MagicDec
// and TriForce): a network, normally the target itself, drafting over a copy
// of its cache that is compressed once, after the prefill. It is a model
// drafter whose prefill does more: the session's prefill forward records what
// the policies score with, the compression acts on the drafter's tracked cache
// and is logged there as one Evict event (the rows each kv head stops reading,
// core/cache/tracked_cache.h), and the copy then holds it as the layout says
// (a keep mask, the kept rows compacted, or compacted and re-rotated).
// Rows written while decoding are kept.
#include <cstdint>
#include <memory>
#include <string>

#include "core/compress/draft_cache.h"
#include "core/compress/prefill_compression.h"
#include "core/decode/drafter.h"

namespace kvscope {

class CompressedCacheDrafter : public ModelDrafter {
 public:
  // Throws Error for bad settings, eviction on a model with sliding-window
  // layers, or a re-rotated layout on a model without rotary keys (before any work).
  CompressedCacheDrafter(std::shared_ptr<const CausalLM> model, CompressionSpec spec, DraftCacheLayout layout,
                         std::string name);
  DrafterType type() const override { return DrafterType::CompressedCache; }
  std::string describe() const override;
  void prefill(TrackedCache& cache, const Moment& moment,
               const std::function<void(ProbeSink*)>& feed_prefix) const override;

 private:
  CompressionSpec spec_;
  DraftCacheLayout layout_;
  std::string name_;
};

}  // namespace kvscope
