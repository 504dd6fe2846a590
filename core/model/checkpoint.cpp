#include "core/model/checkpoint.h"

#include "core/model/dense.h"
#include "core/model/few_rows.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_limits.h"
#include "core/runtime/allocator_tuning.h"

namespace kvscope {
namespace fs = std::filesystem;

namespace {

c10::ScalarType torchDtype(StDType dtype, const std::string& context) {
  switch (dtype) {
    case StDType::F64: return torch::kFloat64;
    case StDType::F32: return torch::kFloat32;
    case StDType::F16: return torch::kFloat16;
    case StDType::BF16: return torch::kBFloat16;
    case StDType::I64: return torch::kInt64;
    case StDType::I32: return torch::kInt32;
    case StDType::I16: return torch::kInt16;
    case StDType::I8: return torch::kInt8;
    case StDType::U8: return torch::kUInt8;
    case StDType::BOOL: return torch::kBool;
  }
  fail(context, "unsupported dtype");
}

StDType stDtype(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64: return StDType::F64;
    case torch::kFloat32: return StDType::F32;
    case torch::kFloat16: return StDType::F16;
    case torch::kBFloat16: return StDType::BF16;
    case torch::kInt64: return StDType::I64;
    case torch::kInt32: return StDType::I32;
    case torch::kInt16: return StDType::I16;
    case torch::kInt8: return StDType::I8;
    case torch::kUInt8: return StDType::U8;
    case torch::kBool: return StDType::BOOL;
    default: break;
  }
  throw Error(std::string("saveTensors: unsupported tensor dtype ") + c10::toString(dtype));
}

// The largest public checkpoints use a few hundred shards (DeepSeek-V3: 163).
constexpr size_t kMaxShards = 4096;

// Maps shard files named by model.safetensors.index.json, in first-use order.
std::vector<std::string> shardFiles(const fs::path& index_path) {
  const nlohmann::json index = readJsonFileWithLimits(index_path.string(), kShardIndexLimits);
  if (!index.is_object()) fail(index_path.string(), "not a JSON object");
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail(index_path.string(), "missing 'weight_map' object");
  }
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) fail(index_path.string(), "weight_map entry for '" + tensor + "' is not a file name");
    const std::string name = file.get<std::string>();
    if (name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
      fail(index_path.string(), "shard name '" + name + "' must be a plain file name");
    }
    if (!seen.insert(name).second) continue;
    if (files.size() == kMaxShards)
      fail(index_path.string(), "weight_map names more than " + std::to_string(kMaxShards) + " shard files, the limit");
    files.push_back(name);
  }
  if (files.empty()) fail(index_path.string(), "weight_map is empty");
  return files;
}

// Drops the mapped pages of rows [r, r + n) of a stored [rows, cols] tensor
// once they are copied: a 0.5 B model's 272 MB bfloat16 embedding would
// otherwise be resident twice (mapped and copied) until its copy ends, and
// the load's peak would be the model plus its largest tensor.
void releaseRows(const SafetensorsFile& file, const StTensorInfo& info, int64_t r, int64_t n, int64_t cols) {
  const size_t row_bytes = static_cast<size_t>(cols) * stDTypeSize(info.dtype);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(file.data(info)) + static_cast<uintptr_t>(r) * row_bytes;
  // Only whole pages inside the rows: the next rows are still to be read.
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + static_cast<uintptr_t>(n) * row_bytes) / page * page;
  // Advice only, as in SafetensorsFile::release.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// Releases a tensor's mapped rows as they are copied, 1024 rows at a time:
// each madvise flushes the TLB of every core, and per 64-row block they were
// a tenth of a load.
class MappedRowRelease {
 public:
  MappedRowRelease(const SafetensorsFile& file, const StTensorInfo& info, int64_t rows, int64_t cols)
      : file_(file), info_(info), rows_(rows), cols_(cols) {}
  void copiedUpTo(int64_t row) {
    constexpr int64_t kRowsPerRelease = 1024;
    if (row - released_ < kRowsPerRelease && row != rows_) return;
    releaseRows(file_, info_, released_, row - released_, cols_);
    released_ = row;
  }

 private:
  const SafetensorsFile& file_;
  const StTensorInfo& info_;
  int64_t rows_, cols_;
  int64_t released_ = 0;
};

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path root(dir);
  std::vector<std::string> files;
  if (fs::exists(root / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else if (fs::exists(root / "model.safetensors.index.json")) {
    files = shardFiles(root / "model.safetensors.index.json");
  } else {
    fail(dir, "no model.safetensors or model.safetensors.index.json in the directory");
  }
  for (const std::string& name : files) {
    auto file = SafetensorsFile::open((root / name).string());
    for (const StTensorInfo& info : file->tensors()) {
      if (ckpt.where_.count(info.name)) fail(file->path(), "tensor '" + info.name + "' also appears in another shard");
      ckpt.where_[info.name] = ckpt.files_.size();
    }
    ckpt.files_.push_back(std::move(file));
  }
  return ckpt;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& entry : where_) out.push_back(entry.first);
  return out;
}

const StTensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, "missing tensor '" + name + "'");
  return *files_[it->second]->find(name);
}

const std::string& Checkpoint::fileOf(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, "missing tensor '" + name + "'");
  return files_[it->second]->path();
}

const SafetensorsFile& Checkpoint::floatingTensor(const std::string& name, const c10::TensorOptions& options) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, "missing tensor '" + name + "'");
  const SafetensorsFile& file = *files_[it->second];
  const StTensorInfo& info = *file.find(name);
  // An integer or bool tensor where a floating weight is wanted would be
  // used as if it were one (embedding rows of 0/1).
  const StDType stored = info.dtype;
  const bool stored_floating = stored == StDType::F64 || stored == StDType::F32 || stored == StDType::F16 ||
                               stored == StDType::BF16;
  if (c10::isFloatingType(options.dtype().toScalarType()) && !stored_floating)
    fail(file.path(), "tensor '" + name + "' is stored as " + stDTypeName(stored) +
                          ", but weights must be F32, F16, BF16 or F64");
  return file;
}

at::Tensor Checkpoint::load(const std::string& name, const c10::TensorOptions& options, bool inference_layout) const {
  const SafetensorsFile& file = floatingTensor(name, options);
  const StTensorInfo& info = *file.find(name);
  at::Tensor tensor = toTensor(file, info, options, inference_layout);
  file.release(info);
  return tensor;
}

void Checkpoint::loadInto(const std::string& name, at::Tensor& panels) const {
  const SafetensorsFile& file = floatingTensor(name, panels.options());
  const StTensorInfo& info = *file.find(name);
  if (panels.dim() != 3 || panels.size(2) != kPanelWidth)
    fail(file.path(), "tensor '" + name + "' is loaded into a destination that is not panels [P, in, 16]");
  const std::vector<int64_t> fits{panels.size(0) * kPanelWidth, panels.size(1)};
  if (info.shape != fits)
    fail(file.path(), "tensor '" + name + "' does not fit the " + std::to_string(fits[0]) + " x " +
                          std::to_string(fits[1]) + " weight it is loaded as");
  toPanels(file, info, panels);
  file.release(info);
}

at::Tensor toTensor(const SafetensorsFile& file, const StTensorInfo& info, const c10::TensorOptions& options,
                    bool inference_layout) {
  const auto dtype = torchDtype(info.dtype, file.path());
  // from_blob wants a mutable pointer; the mapping is read-only, so the view
  // is only read and immediately copied.
  auto* bytes = const_cast<uint8_t*>(file.data(info));
  auto view = torch::from_blob(bytes, info.shape, torch::TensorOptions().dtype(dtype));
  const bool floating = c10::isFloatingType(dtype);
  const c10::TensorOptions target = floating ? options : options.dtype(dtype);
  if (!inference_layout || view.dim() != 2) return view.to(target, /*non_blocking=*/false, /*copy=*/true);
  // Converted straight into the inference layout (core/model/dense.h), a
  // block of rows at a time: no converted row-major copy exists beside it
  // (545 MB for a 0.5 B model's embedding). Each block is converted
  // contiguously (vectorised), then rearranged from a cache-sized buffer;
  // one strided element-wise copy of the whole tensor is several times slower.
  const int64_t rows = view.size(0), cols = view.size(1);
  constexpr int64_t kBlockRows = 64;  // a multiple of the panel width
  if (packsIntoPanels(rows, cols, target.dtype().toScalarType())) {
    at::Tensor panels = at::empty({rows / kPanelWidth, cols, kPanelWidth}, target);  // [P, in, 16]
    adviseHugePages(panels.data_ptr(), panels.nbytes());
    toPanels(file, info, panels);
    return panels;
  }
  // [rows, cols] with strides (1, rows): the transpose is the contiguous block.
  at::Tensor out = at::empty_strided(view.sizes(), {1, rows}, target);
  adviseHugePages(out.data_ptr(), out.nbytes());
  MappedRowRelease release(file, info, rows, cols);
  at::Tensor out_t = out.t();  // [cols, rows], contiguous
  for (int64_t r = 0; r < rows; r += kBlockRows) {
    const int64_t n = std::min(kBlockRows, rows - r);
    const at::Tensor block = view.narrow(0, r, n).to(target);  // [n, cols]
    out_t.narrow(1, r, n).copy_(block.t());
    release.copiedUpTo(r + n);
  }
  return out;
}

void toPanels(const SafetensorsFile& file, const StTensorInfo& info, at::Tensor& panels) {
  auto* bytes = const_cast<uint8_t*>(file.data(info));  // read only, as in toTensor
  auto view = torch::from_blob(bytes, info.shape, torch::TensorOptions().dtype(torchDtype(info.dtype, file.path())));
  const int64_t rows = view.size(0), cols = view.size(1);
  constexpr int64_t kBlockRows = 64;  // a multiple of the panel width
  MappedRowRelease release(file, info, rows, cols);
  for (int64_t r = 0; r < rows; r += kBlockRows) {
    const int64_t n = std::min(kBlockRows, rows - r);  // a multiple of 16: rows is
    const at::Tensor block = view.narrow(0, r, n).to(panels.scalar_type());  // [n, cols]
    panels.narrow(0, r / kPanelWidth, n / kPanelWidth).copy_(block.view({n / kPanelWidth, kPanelWidth, cols}).transpose(1, 2));
    release.copiedUpTo(r + n);
  }
}

void saveTensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                 const std::map<std::string, std::string>& metadata, StDType storage) {
  const auto storage_dtype = torchDtype(storage, path);
  std::vector<at::Tensor> keep_alive;
  std::vector<StWriteTensor> out;
  keep_alive.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(torch::kCPU);
    if (c10::isFloatingType(t.scalar_type())) t = t.to(storage_dtype);
    t = t.contiguous();
    keep_alive.push_back(t);
    StWriteTensor w;
    w.name = name;
    w.dtype = stDtype(t.scalar_type());
    w.shape = t.sizes().vec();
    w.data = t.data_ptr();
    w.nbytes = t.numel() * t.element_size();
    out.push_back(std::move(w));
  }
  writeSafetensors(path, out, metadata);
}

}  // namespace kvscope
