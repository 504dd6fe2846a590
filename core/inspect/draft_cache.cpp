#include "core/inspect/draft_cache.h"

#include <algorithm>

#include <torch/types.h>

#include "core/error.h"
#include "core/model/key_rerotation.h"
#include "core/model/scoring.h"

namespace kvscope {

const char* draftCacheLayoutName(DraftCacheLayout layout) {
  switch (layout) {
    case DraftCacheLayout::Masked: return "masked";
    case DraftCacheLayout::Compacted: return "compacted";
    case DraftCacheLayout::Rerotated: return "rerotated";
  }
  return "?";
}

DraftCacheLayout parseDraftCacheLayout(const std::string& name) {
  for (DraftCacheLayout layout : {DraftCacheLayout::Masked, DraftCacheLayout::Compacted, DraftCacheLayout::Rerotated}) {
    if (name == draftCacheLayoutName(layout)) return layout;
  }
  throw Error("--draft-cache must be one of masked, compacted, rerotated, got '" + name + "'");
}

DraftCache::DraftCache(const CausalLM& model, const at::Tensor& tokens, const CompressionSpec& spec,
                       DraftCacheLayout layout, KvCache* uncompressed)
    : cache_(model.makeCache()) {
  if (layout == DraftCacheLayout::Rerotated) checkKeysRerotatable(model.config());
  prefillAndCompress(model, tokens, *cache_, spec, uncompressed);
  if (layout == DraftCacheLayout::Masked) return;
  for (int64_t l = 0; l < cache_->numLayers(); ++l) cache_->compact(l);
  if (layout == DraftCacheLayout::Rerotated) {
    const int64_t sequence_end = cache_->endPosition(0);
    shift_ = sequence_end - rerotateToContiguous(model.config(), *cache_);
  }
}

void DraftCache::catchUp(const CausalLM& model, const std::vector<int64_t>& sequence, int64_t end) {
  const int64_t start = fed();
  if (start >= end) return;
  model.forward(idsTensor({sequence.begin() + start, sequence.begin() + end}), positionOf(start), cache_.get(), nullptr, 0);
}

void DraftCache::cropTo(int64_t end) { cache_->cropToPosition(positionOf(std::min(end, fed()))); }

}  // namespace kvscope
