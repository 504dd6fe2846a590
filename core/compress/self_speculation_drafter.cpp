#include "core/compress/self_speculation_drafter.h"

#include "core/model/key_rerotation.h"
#include "core/model/probe_recorder.h"

namespace kvscope {

CompressedCacheDrafter::CompressedCacheDrafter(std::shared_ptr<const CausalLM> model, CompressionSpec spec,
                                               DraftCacheLayout layout, std::string name)
    : ModelDrafter(std::move(model), name), spec_(std::move(spec)), layout_(layout), name_(std::move(name)) {
  checkCompressible(this->model()->config(), spec_);
  if (layout_ == DraftCacheLayout::Rerotated) checkKeysRerotatable(this->model()->config());
}

std::string CompressedCacheDrafter::describe() const {
  const std::string compression = compressionEventName(spec_);
  return name_ + " over its cache compressed by " + (compression.empty() ? std::string("nothing") : compression) + " (" +
         draftCacheLayoutName(layout_) + ")";
}

void CompressedCacheDrafter::prefill(TrackedCache& cache, const Moment& moment,
                                     const std::function<void(ProbeSink*)>& feed_prefix) const {
  ProbeRecorder evidence(compressionEvidence(spec_));
  feed_prefix(&evidence);
  // The cache takes the compression and logs it as one Evict event.
  if (spec_.eviction || spec_.pruning) cache.compress(moment, compressionEventName(spec_), compressionRequest(spec_, evidence));
  if (layout_ == DraftCacheLayout::Masked) return;
  // Compaction gathers the rows each kv head still reads (attention over them
  // equals attention over the masked layer); re-rotation then moves the kept
  // keys to contiguous positions, which changes what the draft computes.
  const ModelConfig& config = model()->config();
  const DraftCacheLayout layout = layout_;
  cache.moveRows([&config, layout](KvCache& rows) {
    for (int64_t l = 0; l < rows.numLayers(); ++l) rows.compact(l);
    if (layout != DraftCacheLayout::Rerotated) return int64_t{0};
    const int64_t sequence_end = rows.endPosition(0);
    return sequence_end - rerotateToContiguous(config, rows);
  });
}

}  // namespace kvscope
