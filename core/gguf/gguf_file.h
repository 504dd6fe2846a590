#pragma once
// The GGUF container (llama.cpp's model file, version 3), written and read by
// kvscope's own code. Torch-free.
//
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: key (u64 length + UTF-8), u32 value type, value
//   tensor infos: name, u32 n_dims, u64 ne[n_dims] (ne[0] innermost), u32 ggml type, u64 offset
//   padding to general.alignment (32), then the tensor data, each tensor aligned.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kvscope {

// Metadata value types, numbered as the format numbers them.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12
};
const char* ggufTypeName(GgufType type);

// One metadata value: a scalar (one element) or an array of one element type.
// Integers and booleans live in `ints`, F32/F64 in `floats`, strings in `strings`.
struct GgufValue {
  GgufType type = GgufType::U32;  // the element type (never ARRAY)
  bool is_array = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  size_t size() const;
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue stringArray(std::vector<std::string> v);
  static GgufValue i32Array(std::vector<int32_t> v);
  static GgufValue f32Array(std::vector<float> v);
};

// The tensor element types kvscope writes and reads (ggml's numbering).
// Anything else (the quantized types) is refused by number.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, BF16 = 30 };
const char* ggmlTypeName(GgmlType type);
uint64_t ggmlTypeSize(GgmlType type);

// A tensor to write. ne is in ggml order (ne[0] the innermost, contiguous
// axis): a row-major [rows, cols] matrix is ne = {cols, rows}. `bytes` is
// called once, when the writer reaches the tensor, and must return exactly
// nbytes() bytes (little-endian), so only one tensor is in memory at a time.
struct GgufTensorOut {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;
  std::function<std::vector<uint8_t>()> bytes;
  uint64_t nbytes() const;
};

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// Writes a GGUF v3 file atomically (a temporary file beside `path`, then a
// rename). general.alignment is written when absent from `metadata`.
void writeGguf(const std::string& path, const GgufMetadata& metadata, const std::vector<GgufTensorOut>& tensors,
               uint32_t alignment = 32);

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
};

// A GGUF file's header, fully validated (readGguf).
struct GgufFile {
  uint32_t version = 0;
  GgufMetadata metadata;
  std::vector<GgufTensorInfo> tensors;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute file offset of the data section
  uint64_t file_size = 0;

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* tensor(const std::string& name) const;
  // Typed look-ups; throw Error naming the key when absent or of another type.
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;  // any numeric type
  const std::string& text(const std::string& key) const;
};

// Reads and checks a GGUF file's header: magic, version 3 (2 accepted),
// counts and string/array lengths bounded by the bytes left in the file
// before anything is allocated, known value types, no nested arrays, no
// duplicate key or tensor name, tensor names of 1-63 bytes, 1-4 dims with no
// overflow, F32/F16/BF16 tensors (others are refused by ggml type number),
// general.alignment a u32 power of two, each tensor aligned, inside the file
// and not overlapping another, and the vocabulary consistent
// (checkGgufVocab). Throws Error("<path>: <problem>"); names from the file
// appear in messages with control characters escaped (visibleText).
GgufFile readGguf(const std::string& path);

// The bytes of one tensor of a file read by readGguf, or `count` of them from
// byte `first` (checked against the tensor's size).
std::vector<uint8_t> readGgufTensorBytes(const std::string& path, const GgufFile& file, const GgufTensorInfo& info);
std::vector<uint8_t> readGgufTensorBytes(const std::string& path, const GgufFile& file, const GgufTensorInfo& info, uint64_t first,
                                         uint64_t count);
// Elements [first, first + count) of a tensor (flat, ne[0] fastest) as float32.
std::vector<float> readGgufFloats(const std::string& path, const GgufFile& file, const GgufTensorInfo& info, uint64_t first,
                                  uint64_t count);

}  // namespace kvscope
