#include "core/compress/draft_cache.h"

#include "core/error.h"

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

}  // namespace kvscope
