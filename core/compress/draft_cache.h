#pragma once
// How the drafting copy of the cache in compressed-cache self-speculation
// holds its compression (core/compress/self_speculation_drafter.h): a keep
// mask, the kept rows compacted, or compacted and re-rotated. A re-rotated
// copy numbers its positions from its own rows, not from the sequence.
#include <string>

namespace kvscope {

// How the drafting copy of the cache holds a compression.
enum class DraftCacheLayout {
  Masked,     // keep mask: removed rows stay in storage and attention still computes over them
  Compacted,  // the kept rows gathered per kv head; keys keep the positions they were written at
  Rerotated,  // compacted, kept keys re-rotated to contiguous positions, new tokens continue from
              // there (StreamingLLM, SinkCache); RoPE models only; changes the draft's numbers
};
const char* draftCacheLayoutName(DraftCacheLayout layout);
// "masked", "compacted" or "rerotated"; throws Error listing them.
DraftCacheLayout parseDraftCacheLayout(const std::string& name);

}  // namespace kvscope
