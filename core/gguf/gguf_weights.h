#pragma once
// The weights of a Hugging Face model directory as float32 arrays, for the
// GGUF exporter: model.safetensors or the shards of
// model.safetensors.index.json, F32/F16/BF16 storage. Torch-free, one tensor
// in memory at a time.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/safetensors.h"

namespace kvscope {

// A row-major float32 tensor.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
};

class WeightFiles {
 public:
  // Throws Error when the directory has neither file or a file is invalid.
  static WeightFiles open(const std::string& dir);
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<int64_t> shape(const std::string& name) const;
  // Throws Error naming the tensor when absent or not a float tensor.
  HostTensor load(const std::string& name) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, std::pair<size_t, const StTensorInfo*>> where_;
};

// IEEE half precision, round to nearest even (overflow to infinity).
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
// bfloat16 (the high half of a float32) to float32.
float bf16ToFloat(uint16_t b);

// Row-major [rows, cols] -> [cols, rows].
HostTensor transposed(const HostTensor& t);
// Llama's rotary layout change: HF rotates the two halves of each head's
// vector (rotate_half); llama.cpp's default rope rotates adjacent pairs. Rows
// of each head are reordered [0, d/2, 1, d/2+1, ...] (d = rows / heads) so
// that llama.cpp's pairs hold what HF's halves held. Works on weights
// [heads*d, in] and biases [heads*d].
HostTensor interleaveHeads(const HostTensor& t, int64_t heads);
// The inverse of interleaveHeads on one row of keys (d values per head).
void deinterleaveHeadRow(float* row, int64_t heads, int64_t head_dim);

}  // namespace kvscope
