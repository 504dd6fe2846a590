#pragma once
// The drafting copy of the cache in compressed-cache self-speculation: the
// prefill, the compression, and how the copy then holds it (a keep mask, the
// kept rows compacted, or compacted and re-rotated). It is nobody's record,
// so its rows may move; the Session's caches never do.
//
// A re-rotated cache numbers its positions from its own rows, not from the
// sequence: `shift` is how far they sit before the sequence's positions.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/inspect/prefill_compression.h"

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

class DraftCache {
 public:
  // Prefills `model` with tokens ([n] ids at positions 0..n-1), compresses as
  // spec says and lays the result out. `uncompressed`, when given, receives
  // the prefilled cache before compression (prefillAndCompress). Throws Error
  // for a re-rotated layout on a model without rotary keys (before any work)
  // and for a compression whose kv heads keep different row counts (a
  // compacted layer cannot hold it).
  DraftCache(const CausalLM& model, const at::Tensor& tokens, const CompressionSpec& spec, DraftCacheLayout layout,
             KvCache* uncompressed = nullptr);

  KvCache& cache() { return *cache_; }
  const KvCache& cache() const { return *cache_; }
  // Tokens of the sequence the cache holds (every layer ends at the same position).
  int64_t fed() const { return cache_->endPosition(0) + shift_; }
  // The position the model must be fed at for sequence position p.
  int64_t positionOf(int64_t sequence_position) const { return sequence_position - shift_; }
  // How far the copy's positions sit before the sequence's (0 unless re-rotated).
  int64_t shift() const { return shift_; }
  // Feeds sequence[fed() .. end) so the cache holds `end` tokens.
  void catchUp(const CausalLM& model, const std::vector<int64_t>& sequence, int64_t end);
  // Drops the rows of sequence positions >= end (rejected drafts).
  void cropTo(int64_t end);

 private:
  std::unique_ptr<KvCache> cache_;
  int64_t shift_ = 0;
};

}  // namespace kvscope
