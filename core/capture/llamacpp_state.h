#pragma once
// llama.cpp's sequence state (llama_state_seq_save_file, or the buffer of
// llama_state_seq_get_data), read into per-layer K and V rows. Torch-free.
//
// File: u32 magic "ggsq", u32 version (3), u32 token count, i32 tokens;
// then the buffer llama_state_seq_get_data writes, per KV cache (an iSWA
// model writes its full-attention cache, then its sliding-window cache):
//   u32 streams; per stream u32 cells, and when cells > 0:
//     per cell: i32 pos, u32 n_seq, i32 seq ids
//     u32 v_trans, u32 layers
//     per layer: i32 K type, u64 K row bytes, cells x row
//     per layer, V rows as K (v_trans 0) or i32 type, u32 element bytes,
//       u32 width, then per element of the width its value in every cell.
// Each cell's row is the layer's K (or V) of every kv head, head-major.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

enum class LlamaCacheType { F32, F16, BF16 };
const char* llamaCacheTypeName(LlamaCacheType type);

struct LlamaStateLayer {
  LlamaCacheType k_type = LlamaCacheType::F32;
  LlamaCacheType v_type = LlamaCacheType::F32;
  // [cells, width] row-major, the cache's own element bits (2 or 4 bytes each).
  std::vector<uint8_t> k;
  std::vector<uint8_t> v;
};

// One llama_kv_cache's cells of the sequence, in cell (slot) order.
struct LlamaStateCache {
  std::vector<int32_t> positions;
  bool v_trans = false;
  std::vector<LlamaStateLayer> layers;
};

struct LlamaSeqState {
  uint32_t version = 0;
  std::vector<int32_t> tokens;        // what the program passed as the sequence's tokens
  std::vector<LlamaStateCache> caches;  // 1, or 2 for an iSWA model (full, then sliding)
};

// What the model says the state must hold; the reader refuses anything else.
struct LlamaStateShape {
  std::vector<int64_t> cache_layers;  // layers per cache, e.g. {2} or {13, 13}
  int64_t kv_width = 0;               // kv_heads * head_dim
};

// Reads a state file. Checks the magic, version 3, the declared stream and
// cell counts, sequence ids and row sizes against the bytes left before
// allocating, known cache types (F32, F16, BF16; quantized caches are refused
// naming their ggml type), one stream holding the cells, every byte used.
// Throws Error("<path>: <problem>").
LlamaSeqState readLlamaSeqState(const std::string& path, const LlamaStateShape& shape);

}  // namespace kvscope
