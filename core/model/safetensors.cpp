// Safetensors reader: memory-maps the file and validates the header against
// everything the format promises before handing out any tensor bytes.
#include "core/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/json_limits.h"

namespace kvscope {

namespace {

using Json = nlohmann::json;

// A sane bound on the JSON header (the reference implementation uses the same).
constexpr uint64_t kMaxHeaderBytes = 100000000;
// Real checkpoints hold at most a few thousand tensors per file; each costs
// ~150 bytes here, so this bounds the index at about 30 MB.
constexpr size_t kMaxTensors = 200000;

struct DTypeEntry {
  StDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {StDType::F64, "F64", 8}, {StDType::F32, "F32", 4},  {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4},
    {StDType::I16, "I16", 2}, {StDType::I8, "I8", 1},    {StDType::U8, "U8", 1},
    {StDType::BOOL, "BOOL", 1},
};

const DTypeEntry& dtypeEntry(StDType dtype) {
  for (const auto& entry : kDTypes)
    if (entry.dtype == dtype) return entry;
  throw Error("safetensors: invalid StDType value " +
              std::to_string(static_cast<int>(dtype)));
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::string rangeString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string named(const std::string& name) { return "'" + name + "'"; }

uint64_t readLittleEndian64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// Reads a non-negative JSON integer; returns false when it is not one.
bool readUnsigned(const Json& value, uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

size_t stDTypeSize(StDType dtype) { return dtypeEntry(dtype).size; }

const char* stDTypeName(StDType dtype) { return dtypeEntry(dtype).name; }

StDType parseStDType(const std::string& name, const std::string& context) {
  for (const auto& entry : kDTypes)
    if (name == entry.name) return entry.dtype;
  fail(context, "unknown dtype " + named(name));
}

uint64_t StTensorInfo::numel() const {
  uint64_t count = 1;
  for (int64_t dim : shape) count *= static_cast<uint64_t>(dim);
  return count;
}

namespace {

// Parses one tensor entry of the header into `info` and checks it on its own
// (fields, dtype, shape, offsets, span == numel x dtype size).
void parseTensorEntry(const std::string& path, const std::string& name,
                      const Json& entry, StTensorInfo& info) {
  const std::string what = "tensor " + named(name);
  if (!entry.is_object()) fail(path, what + ": entry is not a JSON object");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string& key = it.key();
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(path, what + " has unexpected field " + named(key));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) fail(path, what + " is missing field " + named(field));

  info.name = name;
  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) fail(path, what + ": 'dtype' is not a string");
  info.dtype = parseStDType(dtype.get<std::string>(), path + ": " + what);

  const Json& shape = entry["shape"];
  if (!shape.is_array()) fail(path, what + ": 'shape' is not an array");
  for (const auto& dim : shape) {
    uint64_t value = 0;
    if (!readUnsigned(dim, value) ||
        value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, what + ": shape entry " + jsonSnippet(dim) + " is not a non-negative integer (shape " +
                     jsonSnippet(shape) + ")");
    info.shape.push_back(static_cast<int64_t>(value));
  }

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !readUnsigned(offsets[0], info.begin) ||
      !readUnsigned(offsets[1], info.end))
    fail(path, what + " data_offsets " + jsonSnippet(offsets) +
                   " is not a pair [begin, end] of non-negative integers");
  if (info.begin > info.end)
    fail(path, what + " data_offsets " + rangeString(info.begin, info.end) +
                   " begin after end");

  // numel x dtype size, with overflow detection.
  const uint64_t dtype_size = stDTypeSize(info.dtype);
  uint64_t nbytes = dtype_size;
  bool overflow = false;
  for (int64_t dim : info.shape)
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(dim), &nbytes);
  bool zero = std::find(info.shape.begin(), info.shape.end(), 0) != info.shape.end();
  if (zero) {
    nbytes = 0;
    overflow = false;
  }
  const std::string expected = shapeString(info.shape) + " x " + stDTypeName(info.dtype);
  if (overflow)
    fail(path, what + " data_offsets " + rangeString(info.begin, info.end) +
                   " do not match shape " + expected + " (size overflows 64 bits)");
  if (info.end - info.begin != nbytes)
    fail(path, what + " data_offsets " + rangeString(info.begin, info.end) +
                   " do not match shape " + expected + " (" + std::to_string(nbytes) +
                   " bytes)");
}

void parseMetadata(const std::string& path, const Json& entry,
                   std::map<std::string, std::string>& metadata) {
  if (!entry.is_object()) fail(path, "'__metadata__' is not a JSON object");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (!it.value().is_string())
      fail(path, "'__metadata__' value for " + named(it.key()) + " is not a string (" +
                     jsonSnippet(it.value()) + ")");
    metadata[it.key()] = it.value().get<std::string>();
  }
}

// Sorted by begin, the tensors must tile [0, buffer_size) exactly.
void checkLayout(const std::string& path, const std::vector<StTensorInfo>& tensors,
                 uint64_t buffer_size) {
  std::vector<const StTensorInfo*> sorted;
  for (const auto& info : tensors) sorted.push_back(&info);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const StTensorInfo* a, const StTensorInfo* b) {
                     return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
                   });

  // Out of range first. When the tensors are laid out back to back from 0 and
  // only run past the end, the file was most likely cut short.
  bool contiguous = true;
  uint64_t cursor = 0;
  for (const auto* info : sorted) {
    if (info->begin != cursor) contiguous = false;
    cursor = info->end;
  }
  for (const auto* info : sorted) {
    if (info->end <= buffer_size) continue;
    const std::string detail = "tensor " + named(info->name) + " data_offsets " +
                               rangeString(info->begin, info->end) +
                               " out of range: the data buffer holds " +
                               std::to_string(buffer_size) + " bytes";
    if (contiguous)
      fail(path, "file truncated: " + detail + ", the tensors need " + std::to_string(cursor));
    fail(path, detail);
  }

  const StTensorInfo* previous = nullptr;
  cursor = 0;
  for (const auto* info : sorted) {
    if (info->begin < cursor)
      fail(path, "tensors " + named(previous->name) + " " +
                     rangeString(previous->begin, previous->end) + " and " +
                     named(info->name) + " " + rangeString(info->begin, info->end) +
                     " overlap in the data buffer");
    if (info->begin > cursor) {
      if (previous == nullptr)
        fail(path, "gap in the data buffer: bytes " + rangeString(0, info->begin) +
                       " before tensor " + named(info->name) + " belong to no tensor");
      fail(path, "gap in the data buffer: bytes " + rangeString(cursor, info->begin) +
                     " between tensors " + named(previous->name) + " and " +
                     named(info->name) + " belong to no tensor");
    }
    cursor = info->end;
    previous = info;
  }
  if (cursor < buffer_size) {
    if (previous == nullptr)
      fail(path, "gap in the data buffer: " + std::to_string(buffer_size) +
                     " data bytes but no tensors");
    fail(path, "gap in the data buffer: bytes " + rangeString(cursor, buffer_size) +
                   " after tensor " + named(previous->name) +
                   " belong to no tensor (trailing data)");
  }
}

}  // namespace

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size == 0) {
    ::close(fd);
    fail(path, "empty file (truncated: no 8-byte header length)");
  }
  if (file_size < 8) {
    ::close(fd);
    fail(path, "file truncated: " + std::to_string(file_size) +
                   " bytes, shorter than the 8-byte header length");
  }
  void* mapping = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(map_errno));
  file->mapping_ = mapping;  // from here on the destructor unmaps
  file->mapping_size_ = file_size;
  const auto* bytes = static_cast<const uint8_t*>(mapping);

  const uint64_t header_size = readLittleEndian64(bytes);
  if (header_size == 0) fail(path, "header length is 0");
  if (header_size > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_size) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  if (header_size > file_size - 8)
    fail(path, "header length " + std::to_string(header_size) +
                   " past the end of the file (" + std::to_string(file_size) + " bytes)");
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  // Members are checked as they are parsed and never held as JSON: linear
  // in the number of tensors, whatever the header holds.
  bool has_metadata = false;
  auto member = [&](std::string name, Json value) {
    if (name == "__metadata__") {
      if (has_metadata) fail(path, "duplicate key '__metadata__' in the header");
      has_metadata = true;
      parseMetadata(path, value, file->metadata_);
      return;
    }
    if (file->tensors_.size() >= kMaxTensors)
      fail(path, "more than " + std::to_string(kMaxTensors) + " tensors in the header, the limit for one file");
    StTensorInfo info;
    parseTensorEntry(path, name, value, info);
    if (!file->index_.emplace(info.name, file->tensors_.size()).second)
      fail(path, "duplicate tensor name " + named(info.name) + " in the header");
    file->tensors_.push_back(std::move(info));
  };
  const Json header = parseJsonWithLimits(std::string_view(header_begin, header_size), path,
                                          kSafetensorsHeaderLimits, member);
  if (!header.is_object())
    fail(path, std::string("header is not a JSON object (it is ") + header.type_name() + ")");

  const uint64_t buffer_size = file_size - 8 - header_size;
  checkLayout(path, file->tensors_, buffer_size);
  file->data_begin_ = bytes + 8 + header_size;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* SafetensorsFile::data(const StTensorInfo& info) const {
  return data_begin_ + info.begin;
}

void SafetensorsFile::release(const StTensorInfo& info) const {
  // Only whole pages inside the tensor: its neighbours may not be copied yet.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data(info));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + (info.end - info.begin)) / page * page;
  // Advice only: a failure leaves the pages resident, nothing else changes.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace kvscope
