#pragma once
// Re-rotating cached keys to new positions, as StreamingLLM and Hugging
// Face's SinkCache do after dropping rows: a key stored rotated for position
// p is turned to p' by one more rotation through p' - p (the rotations of a
// channel pair commute), so it equals the key computed at p' up to float32
// rounding of the angles. This changes what the model computes (that is the
// point: the kept rows then look contiguous to the queries that follow).
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/cache/kv_cache.h"
#include "core/model/model_config.h"

namespace kvscope {

// Throws Error unless the model's keys carry a rotary position that can be
// turned: GPT-2's learned positions are added to the input, not applied to
// the keys; longrope chooses its factor set per forward call, so the
// rotation a stored key got depends on the call that wrote it.
void checkKeysRerotatable(const ModelConfig& config);

// keys [kv_heads, T, head_dim] rotated for positions `from` ([kv_heads, T]
// int64) -> the same keys rotated for `to` ([kv_heads, T] int64). Equal
// positions give the keys back unchanged.
at::Tensor rerotateKeys(const ModelConfig& config, const at::Tensor& keys, const at::Tensor& from,
                        const at::Tensor& to);

// Re-rotates every layer's keys from the positions their rows hold
// (KvCache::rowPositions, per kv head) to contiguous positions that end
// where the longest layer ends: a layer of n rows gets end - n .. end - 1,
// so the next token's position, end, is the same in every layer (pyramid's
// layers keep different counts). With equal counts that is 0 .. n - 1, as in
// SinkCache. Returns end; the caller feeds new tokens from there.
int64_t rerotateToContiguous(const ModelConfig& config, KvCache& cache);

}  // namespace kvscope
