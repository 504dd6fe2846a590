#include "core/compress/self_speculation_drafter.h"

#include "core/model/key_rerotation.h"
#include "core/model/probe_recorder.h"

namespace kvscope {
namespace {

// The name the compression's Evict event carries.
std::string compressionName(const CompressionSpec& spec) {
  std::string name = spec.eviction ? evictionPolicyName(spec.eviction->policy) : "";
  if (spec.eviction && spec.eviction->demote_bits > 0) name += " (demoted to " + std::to_string(spec.eviction->demote_bits) + " bits)";
  if (spec.pruning) name += std::string(name.empty() ? "" : " + ") + "element pruning";
  return name;
}

// The rows a kv head stops reading: an eviction's, not a demotion's (its
// rows stay visible, as low-precision copies).
std::vector<RemovedRow> rowsNoLongerRead(const CompressionSpec& spec, const PrefillCompression& done) {
  if (!spec.eviction || spec.eviction->demote_bits > 0) return {};
  return done.removed;
}

}  // namespace

CompressedCacheDrafter::CompressedCacheDrafter(std::shared_ptr<const CausalLM> model, CompressionSpec spec,
                                               DraftCacheLayout layout, std::string name)
    : ModelDrafter(std::move(model), name), spec_(std::move(spec)), layout_(layout), name_(std::move(name)) {
  checkCompressible(this->model()->config(), spec_);
  if (layout_ == DraftCacheLayout::Rerotated) checkKeysRerotatable(this->model()->config());
}

std::string CompressedCacheDrafter::describe() const {
  const std::string compression = compressionName(spec_);
  return name_ + " over its cache compressed by " + (compression.empty() ? std::string("nothing") : compression) + " (" +
         draftCacheLayoutName(layout_) + ")";
}

void CompressedCacheDrafter::prefill(TrackedCache& cache, const Moment& moment,
                                     const std::function<void(ProbeSink*)>& feed_prefix) const {
  ProbeRecorder evidence(compressionEvidence(spec_));
  feed_prefix(&evidence);
  KvCache& storage = *cache.storageForForward();
  const PrefillCompression done = compressPrefilled(storage, spec_, evidence);
  if (spec_.eviction || spec_.pruning) cache.logCompression(moment, compressionName(spec_), rowsNoLongerRead(spec_, done));
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
