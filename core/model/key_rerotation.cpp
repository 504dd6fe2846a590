#include "core/model/key_rerotation.h"

#include <algorithm>
#include <string>

#include <torch/types.h>

#include "core/error.h"
#include "core/model/rope.h"

namespace kvscope {

void checkKeysRerotatable(const ModelConfig& config) {
  require(config.arch != Architecture::Gpt2,
          "re-rotating keys needs rotary position embeddings; " + config.architecture_name +
              " (GPT-2) learns absolute positions and adds them to the input, so its keys carry no rotation to redo");
  require(config.rope_scaling.type != RopeScaling::Type::LongRope,
          "re-rotating keys is not supported for longrope (" + config.architecture_name +
              "): its factor set is chosen per forward call, so a stored key's rotation depends on the call that wrote it");
}

at::Tensor rerotateKeys(const ModelConfig& config, const at::Tensor& keys, const at::Tensor& from,
                        const at::Tensor& to) {
  checkKeysRerotatable(config);
  require(keys.dim() == 3 && from.sizes() == keys.sizes().slice(0, 2) && to.sizes() == from.sizes(),
          "rerotateKeys: expected keys [kv_heads, T, head_dim] and positions [kv_heads, T]");
  const int64_t kv_heads = keys.size(0), rows = keys.size(1), head_dim = keys.size(2);
  // One rotation through the difference: R(to) R(from)^-1 = R(to - from).
  const auto shift = (to - from).reshape({kv_heads * rows});       // [kv * T]
  auto [cos, sin] = Rope(config).table(shift);                      // [kv * T, D] each
  return Rope::apply(keys, cos.view({kv_heads, rows, head_dim}),    // [kv, T, D]
                     sin.view({kv_heads, rows, head_dim}));
}

int64_t rerotateToContiguous(const ModelConfig& config, KvCache& cache) {
  checkKeysRerotatable(config);
  int64_t end = 0;
  for (int64_t l = 0; l < cache.numLayers(); ++l) end = std::max(end, cache.length(l));
  for (int64_t l = 0; l < cache.numLayers(); ++l) {
    const int64_t rows = cache.length(l), first = end - rows;
    const auto to = torch::arange(first, end, torch::kInt64).unsqueeze(0).expand({cache.kvHeads(), rows});  // [kv, T]
    const auto stored = cache.keys(l);  // a view of the storage: writing it re-rotates the cache
    const auto turned = rerotateKeys(config, stored.to(torch::kFloat32), cache.rowPositions(l), to);
    stored.copy_(turned.to(stored.scalar_type()));
    cache.renumberRows(l, first);
  }
  return end;
}

}  // namespace kvscope
