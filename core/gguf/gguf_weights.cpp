#include "core/gguf/gguf_weights.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/model/json_limits.h"

namespace kvscope {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> shardNames(const fs::path& index_path) {
  const auto index = readJsonFileWithLimits(index_path.string(), kShardIndexLimits);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(index_path.string(), "no weight_map object");
  std::vector<std::string> names;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) fail(index_path.string(), "weight_map['" + tensor + "'] is not a file name");
    const std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f == "..") fail(index_path.string(), "shard '" + f + "' is not a plain file name");
    if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
  }
  return names;
}

}  // namespace

float bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

WeightFiles WeightFiles::open(const std::string& dir) {
  WeightFiles w;
  w.dir_ = dir;
  const fs::path root(dir);
  std::vector<std::string> names;
  if (fs::exists(root / "model.safetensors")) names.push_back("model.safetensors");
  else if (fs::exists(root / "model.safetensors.index.json")) names = shardNames(root / "model.safetensors.index.json");
  else fail(dir, "no model.safetensors or model.safetensors.index.json in the directory");
  for (const auto& name : names) {
    w.files_.push_back(SafetensorsFile::open((root / name).string()));
    for (const auto& info : w.files_.back()->tensors()) w.where_[info.name] = {w.files_.size() - 1, &info};
  }
  return w;
}

std::vector<int64_t> WeightFiles::shape(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, "the checkpoint has no tensor '" + name + "'");
  return it->second.second->shape;
}

HostTensor WeightFiles::load(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, "the checkpoint has no tensor '" + name + "'");
  const auto& file = *files_[it->second.first];
  const StTensorInfo& info = *it->second.second;
  HostTensor t;
  t.shape = info.shape;
  const uint64_t n = info.numel();
  t.data.resize(n);
  const uint8_t* src = file.data(info);
  switch (info.dtype) {
    case StDType::F32: std::memcpy(t.data.data(), src, n * 4); break;
    case StDType::F16:
      for (uint64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); t.data[i] = halfToFloat(h); }
      break;
    case StDType::BF16:
      for (uint64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); t.data[i] = bf16ToFloat(h); }
      break;
    default: fail(dir_, "tensor '" + name + "' is " + stDTypeName(info.dtype) + ", not a float tensor");
  }
  file.release(info);
  return t;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));  // inf / nan
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // a half subnormal (or zero): scale into the integer range and round
    const float scaled = std::fabs(f) * 16777216.0f;  // 2^24: one unit = the smallest subnormal
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t mant = abs & 0x7FFFFFu;
  const uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // nearest, ties to even (may carry into the exponent)
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  uint32_t bits = sign | (exp == 31 ? (0xFFu << 23) | (mant << 13) : ((exp - 15 + 127) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

HostTensor transposed(const HostTensor& t) {
  if (t.shape.size() != 2) throw Error("transposing a tensor of " + std::to_string(t.shape.size()) + " dimensions");
  HostTensor r;
  r.shape = {t.shape[1], t.shape[0]};
  r.data.resize(t.data.size());
  const int64_t rows = t.shape[0], cols = t.shape[1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r.data[j * rows + i] = t.data[i * cols + j];
  return r;
}

HostTensor interleaveHeads(const HostTensor& t, int64_t heads) {
  const int64_t rows = t.rows(), width = t.shape.size() == 2 ? t.shape[1] : 1;
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    throw Error("interleaving " + std::to_string(rows) + " rows into " + std::to_string(heads) + " heads of even size");
  const int64_t d = rows / heads, half = d / 2;
  HostTensor r = t;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t k = 0; k < 2; ++k) {
        const float* src = t.data.data() + (h * d + k * half + i) * width;
        std::copy(src, src + width, r.data.data() + (h * d + 2 * i + k) * width);
      }
  return r;
}

void deinterleaveHeadRow(float* row, int64_t heads, int64_t head_dim) {
  std::vector<float> tmp(static_cast<size_t>(head_dim));
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* head = row + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      tmp[i] = head[2 * i];
      tmp[half + i] = head[2 * i + 1];
    }
    std::copy(tmp.begin(), tmp.end(), head);
  }
}

}  // namespace kvscope
