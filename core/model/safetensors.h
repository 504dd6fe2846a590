#pragma once
// Reader and writer for the safetensors format
// (8-byte little-endian header length N, N bytes of JSON header, data buffer).
// Torch-free: tensors are described by dtype, shape and byte range; the
// conversion to torch tensors lives in core/model/checkpoint.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvscope {

// The dtypes the format defines (names as written in the header).
enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t stDTypeSize(StDType dtype);
const char* stDTypeName(StDType dtype);
// Throws Error naming the unknown dtype string.
StDType parseStDType(const std::string& name, const std::string& context);

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer (after the header)
  uint64_t end = 0;
  uint64_t numel() const;
};

// A memory-mapped, fully validated safetensors file. open() checks everything
// the format promises and throws Error("<path>: <problem>") otherwise:
// header length within bounds and inside the file, header is a JSON object,
// known dtypes, shape x dtype size == data_offsets span, offsets inside the
// data buffer, tensors tiling the buffer with no gap and no overlap.
class SafetensorsFile {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In header order.
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const StTensorInfo* find(const std::string& name) const;
  // Start of the tensor's bytes (little-endian, row-major).
  const uint8_t* data(const StTensorInfo& info) const;
  // Drops the mapped pages of a tensor already copied out, so a model's
  // stored and converted weights are not resident at once (the pages come
  // back from the page cache if read again).
  void release(const StTensorInfo& info) const;
  // The "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  const uint8_t* data_begin_ = nullptr;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: raw little-endian bytes, row-major.
struct StWriteTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;  // must equal numel x dtype size
};

// Writes a safetensors file atomically (temp file in the same directory, then
// rename), so an existing file at `path` is never left half-written.
// Tensors are laid out in the given order, 8-byte aligned header.
void writeSafetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace kvscope
