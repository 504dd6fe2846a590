#include "core/gguf/gguf_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/gguf/gguf_vocab.h"
#include "core/gguf/gguf_weights.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxCount = 1u << 24;  // tensors, metadata keys, array elements
constexpr uint64_t kMaxString = 1u << 28;

// ---- writing ----

class ByteSink {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  std::vector<uint8_t> bytes;
};

void writeElement(ByteSink& out, GgufType type, const GgufValue& v, size_t i) {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: {
      const auto b = static_cast<uint8_t>(v.ints[i]);
      out.raw(&b, 1);
      return;
    }
    case GgufType::U16: case GgufType::I16: {
      const auto h = static_cast<uint16_t>(v.ints[i]);
      out.raw(&h, 2);
      return;
    }
    case GgufType::U32: case GgufType::I32: out.u32(static_cast<uint32_t>(v.ints[i])); return;
    case GgufType::U64: case GgufType::I64: out.u64(static_cast<uint64_t>(v.ints[i])); return;
    case GgufType::F32: {
      const float f = static_cast<float>(v.floats[i]);
      out.raw(&f, 4);
      return;
    }
    case GgufType::F64: out.raw(&v.floats[i], 8); return;
    case GgufType::STRING: out.str(v.strings[i]); return;
    case GgufType::ARRAY: break;
  }
  throw Error("writing GGUF: nested arrays are not written");
}

void writeValue(ByteSink& out, const std::string& key, const GgufValue& v) {
  if (!v.is_array && v.size() != 1) throw Error("writing GGUF: scalar '" + key + "' must hold one value");
  out.u32(static_cast<uint32_t>(v.is_array ? GgufType::ARRAY : v.type));
  if (v.is_array) {
    out.u32(static_cast<uint32_t>(v.type));
    out.u64(v.size());
  }
  for (size_t i = 0; i < v.size(); ++i) writeElement(out, v.type, v, i);
}

uint64_t alignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// ---- reading ----

// A name from the file (a key, a tensor name) as an error message shows it:
// control characters escaped (the message reaches a terminal or a dialog) and
// long names cut, so a 256 MB key does not become a 256 MB message.
std::string shown(const std::string& name) {
  constexpr size_t kShown = 80;
  if (name.size() <= kShown) return "'" + visibleText(name) + "'";
  return "'" + visibleText(name.substr(0, kShown)) + "...' (" + std::to_string(name.size()) + " bytes)";
}

std::string bytesLeft(uint64_t n) { return "the " + std::to_string(n) + " bytes left"; }

class ByteSource {
 public:
  ByteSource(std::ifstream& in, uint64_t size) : in_(in), size_(size) {}
  uint64_t left() const { return size_ - pos_; }
  uint64_t pos() const { return pos_; }
  void raw(void* p, uint64_t n, const std::string& what) {
    if (n > left()) throw Error("the file ends inside " + what + " (offset " + std::to_string(pos_) + ")");
    in_.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (!in_) throw Error("read error inside " + what);
    pos_ += n;
  }
  uint32_t u32(const std::string& what) { uint32_t v; raw(&v, 4, what); return v; }
  uint64_t u64(const std::string& what) { uint64_t v; raw(&v, 8, what); return v; }
  // A u64 length, then that many bytes: the length is checked against the
  // bytes left before the string is allocated.
  std::string str(const std::string& what) {
    const uint64_t n = u64("the length of " + what);
    if (n > left() || n > kMaxString)
      throw Error(what + ": string length " + std::to_string(n) + " exceeds " +
                  (n > left() ? bytesLeft(left()) : "the limit of " + std::to_string(kMaxString) + " bytes"));
    std::string s(n, '\0');
    raw(s.data(), n, what);
    return s;
  }

 private:
  std::ifstream& in_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The fewest bytes one element of a type takes in the file.
uint64_t elementSize(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: return 8;  // at least its length
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

// The fewest bytes one metadata entry (key length, type, a one-byte value)
// and one tensor info (name length, n_dims, one dimension, type, offset) take.
constexpr uint64_t kMinEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

GgufType parseType(uint32_t raw, const std::string& key) {
  if (raw > static_cast<uint32_t>(GgufType::F64))
    throw Error("metadata " + shown(key) + ": unknown value type " + std::to_string(raw) + " (0-12 are defined)");
  return static_cast<GgufType>(raw);
}

void readElement(ByteSource& in, GgufType t, GgufValue& v, const std::string& key) {
  const std::string what = "the value of metadata " + shown(key);
  switch (t) {
    case GgufType::U8: { uint8_t b; in.raw(&b, 1, what); v.ints.push_back(b); return; }
    case GgufType::I8: { int8_t b; in.raw(&b, 1, what); v.ints.push_back(b); return; }
    case GgufType::BOOL: {
      uint8_t b; in.raw(&b, 1, what);
      if (b > 1) throw Error("metadata " + shown(key) + ": bool value " + std::to_string(b) + " (0 or 1)");
      v.ints.push_back(b);
      return;
    }
    case GgufType::U16: { uint16_t h; in.raw(&h, 2, what); v.ints.push_back(h); return; }
    case GgufType::I16: { int16_t h; in.raw(&h, 2, what); v.ints.push_back(h); return; }
    case GgufType::U32: v.ints.push_back(in.u32(what)); return;
    case GgufType::I32: v.ints.push_back(static_cast<int32_t>(in.u32(what))); return;
    case GgufType::U64: {
      const uint64_t u = in.u64(what);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("metadata " + shown(key) + ": u64 value " + std::to_string(u) + " is 2^63 or more");
      v.ints.push_back(static_cast<int64_t>(u));
      return;
    }
    case GgufType::I64: v.ints.push_back(static_cast<int64_t>(in.u64(what))); return;
    case GgufType::F32: { float f; in.raw(&f, 4, what); v.floats.push_back(f); return; }
    case GgufType::F64: { double d; in.raw(&d, 8, what); v.floats.push_back(d); return; }
    case GgufType::STRING: v.strings.push_back(in.str(what)); return;
    case GgufType::ARRAY: break;
  }
  throw Error("metadata " + shown(key) + ": an array of arrays (nested arrays are not read)");
}

GgufValue readValue(ByteSource& in, const std::string& key) {
  GgufValue v;
  const GgufType t = parseType(in.u32("the type of metadata " + shown(key)), key);
  uint64_t n = 1;
  if (t == GgufType::ARRAY) {
    v.is_array = true;
    v.type = parseType(in.u32("the element type of metadata " + shown(key)), key);
    if (v.type == GgufType::ARRAY) throw Error("metadata " + shown(key) + ": an array of arrays (nested arrays are not read)");
    n = in.u64("the length of metadata " + shown(key));
    // Checked before anything is reserved: n elements take n * elementSize bytes at least.
    if (n > in.left() / elementSize(v.type))
      throw Error("metadata " + shown(key) + ": array of " + std::to_string(n) + " " + ggufTypeName(v.type) +
                  " elements exceeds " + bytesLeft(in.left()));
    if (n > kMaxCount)
      throw Error("metadata " + shown(key) + ": array of " + std::to_string(n) + " elements exceeds the limit of " +
                  std::to_string(kMaxCount));
  } else {
    v.type = t;
  }
  for (uint64_t i = 0; i < n; ++i) readElement(in, v.type, v, key);
  return v;
}

GgmlType parseGgmlType(uint32_t raw, const std::string& name) {
  if (raw == 0) return GgmlType::F32;
  if (raw == 1) return GgmlType::F16;
  if (raw == 30) return GgmlType::BF16;
  throw Error("tensor " + shown(name) + ": ggml type " + std::to_string(raw) +
              " (quantized or unknown; only F32, F16 and BF16 are read)");
}

// llama.cpp's GGML_MAX_NAME is 64 bytes with the terminating zero.
constexpr uint64_t kMaxTensorName = 63;
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

GgufTensorInfo readTensorInfo(ByteSource& in, uint64_t index) {
  GgufTensorInfo t;
  t.name = in.str("the name of tensor " + std::to_string(index));
  if (t.name.empty()) throw Error("tensor " + std::to_string(index) + ": an empty name");
  if (t.name.size() > kMaxTensorName)
    throw Error("tensor " + shown(t.name) + ": a name of " + std::to_string(t.name.size()) + " bytes (llama.cpp's limit is " +
                std::to_string(kMaxTensorName) + ")");
  const uint32_t n_dims = in.u32("the dimension count of tensor " + shown(t.name));
  if (n_dims < 1 || n_dims > 4) throw Error("tensor " + shown(t.name) + ": " + std::to_string(n_dims) + " dimensions (1-4)");
  uint64_t count = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = in.u64("the dimensions of tensor " + shown(t.name));
    if (ne == 0) throw Error("tensor " + shown(t.name) + ": dimension " + std::to_string(d) + " is 0");
    if (ne > kMaxElements / count)
      throw Error("tensor " + shown(t.name) + ": dimension " + std::to_string(d) + " of " + std::to_string(ne) +
                  " makes more than 2^40 elements");
    count *= ne;
    t.ne.push_back(ne);
  }
  t.type = parseGgmlType(in.u32("the type of tensor " + shown(t.name)), t.name);
  t.offset = in.u64("the offset of tensor " + shown(t.name));
  t.nbytes = count * ggmlTypeSize(t.type);
  return t;
}

void checkTensorPlacement(const GgufFile& f) {
  const uint64_t data_size = f.file_size - f.data_offset;
  std::vector<std::pair<uint64_t, const GgufTensorInfo*>> spans;
  for (const auto& t : f.tensors) {
    if (t.offset % f.alignment != 0)
      throw Error("tensor " + shown(t.name) + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                  std::to_string(f.alignment));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw Error("tensor " + shown(t.name) + ": " + std::to_string(t.nbytes) + " bytes at offset " + std::to_string(t.offset) +
                  " run past the end of the file (the data section holds " + std::to_string(data_size) + " bytes)");
    spans.emplace_back(t.offset, &t);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto* prev = spans[i - 1].second;
    if (prev->offset + prev->nbytes > spans[i].first)
      throw Error("tensors " + shown(prev->name) + " and " + shown(spans[i].second->name) + " overlap");
  }
}

// general.alignment: a u32 power of two when present (32 when absent).
uint64_t alignmentOf(const GgufFile& f) {
  const auto* a = f.find("general.alignment");
  if (!a) return 32;
  if (a->is_array || a->type != GgufType::U32)
    throw Error(std::string("general.alignment must be a u32, not ") + (a->is_array ? "an array" : "a ") +
                (a->is_array ? "" : ggufTypeName(a->type)));
  if (a->ints[0] == 0 || (a->ints[0] & (a->ints[0] - 1)) != 0)
    throw Error("general.alignment " + std::to_string(a->ints[0]) + " is not a power of two");
  return static_cast<uint64_t>(a->ints[0]);
}

void readMetadata(ByteSource& src, GgufFile& f, uint64_t n_kv) {
  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = src.str("metadata key " + std::to_string(i));
    if (!keys.insert(key).second) throw Error("metadata key " + shown(key) + " appears twice");
    GgufValue value = readValue(src, key);
    f.metadata.emplace_back(std::move(key), std::move(value));
  }
}

void readTensorInfos(ByteSource& src, GgufFile& f, uint64_t n_tensors) {
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    auto t = readTensorInfo(src, i);
    if (!names.insert(t.name).second) throw Error("tensor " + shown(t.name) + " appears twice");
    f.tensors.push_back(std::move(t));
  }
}

// A count from the header, checked against the bytes left (each entry takes
// at least `min_bytes`) before anything is sized by it.
uint64_t readCount(ByteSource& src, const std::string& what, uint64_t min_bytes) {
  const uint64_t n = src.u64("the " + what);
  if (n > src.left() / min_bytes)
    throw Error("the " + what + " " + std::to_string(n) + " exceeds what " + bytesLeft(src.left()) + " can hold (at least " +
                std::to_string(min_bytes) + " bytes each)");
  if (n > kMaxCount) throw Error("the " + what + " " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxCount));
  return n;
}

}  // namespace

const char* ggufTypeName(GgufType type) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < 13 ? names[i] : "?";
}

size_t GgufValue::size() const {
  if (type == GgufType::STRING) return strings.size();
  if (type == GgufType::F32 || type == GgufType::F64) return floats.size();
  return ints.size();
}

GgufValue GgufValue::u32(uint32_t v) { GgufValue r; r.type = GgufType::U32; r.ints = {v}; return r; }
GgufValue GgufValue::i32(int32_t v) { GgufValue r; r.type = GgufType::I32; r.ints = {v}; return r; }
GgufValue GgufValue::f32(float v) { GgufValue r; r.type = GgufType::F32; r.floats = {v}; return r; }
GgufValue GgufValue::boolean(bool v) { GgufValue r; r.type = GgufType::BOOL; r.ints = {v ? 1 : 0}; return r; }
GgufValue GgufValue::string(std::string v) { GgufValue r; r.type = GgufType::STRING; r.strings = {std::move(v)}; return r; }
GgufValue GgufValue::stringArray(std::vector<std::string> v) {
  GgufValue r; r.type = GgufType::STRING; r.is_array = true; r.strings = std::move(v); return r;
}
GgufValue GgufValue::i32Array(std::vector<int32_t> v) {
  GgufValue r; r.type = GgufType::I32; r.is_array = true; r.ints.assign(v.begin(), v.end()); return r;
}
GgufValue GgufValue::f32Array(std::vector<float> v) {
  GgufValue r; r.type = GgufType::F32; r.is_array = true; r.floats.assign(v.begin(), v.end()); return r;
}

const char* ggmlTypeName(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
  }
  return "?";
}

uint64_t ggmlTypeSize(GgmlType type) { return type == GgmlType::F32 ? 4 : 2; }

uint64_t GgufTensorOut::nbytes() const {
  uint64_t n = ggmlTypeSize(type);
  for (const auto d : ne) n *= d;
  return n;
}

void writeGguf(const std::string& path, const GgufMetadata& metadata, const std::vector<GgufTensorOut>& tensors,
               uint32_t alignment) {
  const std::string context = "writing " + path;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail(context, "alignment must be a power of two");
  GgufMetadata kv = metadata;
  bool has_alignment = false;
  for (const auto& [key, value] : kv) has_alignment = has_alignment || key == "general.alignment";
  if (!has_alignment) kv.emplace_back("general.alignment", GgufValue::u32(alignment));

  ByteSink head;
  head.u32(kMagic);
  head.u32(3);
  head.u64(tensors.size());
  head.u64(kv.size());
  for (const auto& [key, value] : kv) {
    head.str(key);
    writeValue(head, key, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    head.str(t.name);
    head.u32(static_cast<uint32_t>(t.ne.size()));
    for (const auto d : t.ne) head.u64(d);
    head.u32(static_cast<uint32_t>(t.type));
    head.u64(offset);
    offset = alignUp(offset + t.nbytes(), alignment);
  }
  head.bytes.resize(alignUp(head.bytes.size(), alignment), 0);

  const fs::path target(path);
  const fs::path temp = target.parent_path() / (target.filename().string() + ".partial");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail(context, "cannot create " + temp.string());
    out.write(reinterpret_cast<const char*>(head.bytes.data()), static_cast<std::streamsize>(head.bytes.size()));
    const std::vector<char> zeros(alignment, 0);
    for (const auto& t : tensors) {
      const auto bytes = t.bytes();
      if (bytes.size() != t.nbytes()) {
        out.close();
        fs::remove(temp);
        fail(context, "tensor '" + t.name + "' produced " + std::to_string(bytes.size()) + " bytes where its shape needs " +
                          std::to_string(t.nbytes()));
      }
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      out.write(zeros.data(), static_cast<std::streamsize>(alignUp(bytes.size(), alignment) - bytes.size()));
    }
    if (!out) {
      out.close();
      fs::remove(temp);
      fail(context, "write failed (disk full?)");
    }
  }
  fs::rename(temp, target);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

int64_t GgufFile::integer(const std::string& key) const {
  const auto* v = find(key);
  if (!v) throw Error("GGUF metadata has no '" + key + "'");
  if (v->is_array || v->ints.size() != 1) throw Error("GGUF metadata '" + key + "' is not an integer");
  return v->ints[0];
}

double GgufFile::number(const std::string& key) const {
  const auto* v = find(key);
  if (!v) throw Error("GGUF metadata has no '" + key + "'");
  if (v->is_array || v->size() != 1 || v->type == GgufType::STRING) throw Error("GGUF metadata '" + key + "' is not a number");
  return v->floats.empty() ? static_cast<double>(v->ints[0]) : v->floats[0];
}

const std::string& GgufFile::text(const std::string& key) const {
  const auto* v = find(key);
  if (!v) throw Error("GGUF metadata has no '" + key + "'");
  if (v->is_array || v->type != GgufType::STRING) throw Error("GGUF metadata '" + key + "' is not a string");
  return v->strings[0];
}

GgufFile readGguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  GgufFile f;
  std::error_code ec;
  f.file_size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot read its size");
  try {
    ByteSource src(in, f.file_size);
    if (src.u32("the magic") != kMagic) throw Error("not a GGUF file (bad magic)");
    f.version = src.u32("the version");
    if (f.version != 3 && f.version != 2) throw Error("GGUF version " + std::to_string(f.version) + " (2 and 3 are read)");
    // Both counts come before the metadata: the tensor count is checked again
    // once the metadata is read (fewer bytes are left then).
    const uint64_t n_tensors = readCount(src, "tensor count", kMinTensorInfoBytes);
    const uint64_t n_kv = readCount(src, "metadata count", kMinEntryBytes);
    readMetadata(src, f, n_kv);
    f.alignment = alignmentOf(f);
    if (n_tensors > src.left() / kMinTensorInfoBytes)
      throw Error("the tensor count " + std::to_string(n_tensors) + " exceeds what " + bytesLeft(src.left()) +
                  " after the metadata can hold");
    readTensorInfos(src, f, n_tensors);
    f.data_offset = alignUp(src.pos(), f.alignment);
    if (f.data_offset > f.file_size)
      throw Error("the file ends inside the padding before the data section (it starts at " + std::to_string(f.data_offset) +
                  ", the file has " + std::to_string(f.file_size) + " bytes)");
    checkGgufVocab(f);
    checkTensorPlacement(f);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return f;
}

std::vector<uint8_t> readGgufTensorBytes(const std::string& path, const GgufFile& file, const GgufTensorInfo& info) {
  return readGgufTensorBytes(path, file, info, 0, info.nbytes);
}

std::vector<uint8_t> readGgufTensorBytes(const std::string& path, const GgufFile& file, const GgufTensorInfo& info, uint64_t first,
                                         uint64_t count) {
  if (first > info.nbytes || count > info.nbytes - first)
    fail(path, "bytes [" + std::to_string(first) + ", +" + std::to_string(count) + ") of tensor " + shown(info.name) + " (it has " +
                   std::to_string(info.nbytes) + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::vector<uint8_t> bytes(count);
  in.seekg(static_cast<std::streamoff>(file.data_offset + info.offset + first));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail(path, "reading tensor " + shown(info.name) + " failed");
  return bytes;
}

std::vector<float> readGgufFloats(const std::string& path, const GgufFile& file, const GgufTensorInfo& info, uint64_t first,
                                  uint64_t count) {
  const uint64_t el = ggmlTypeSize(info.type);
  if (first > info.nbytes / el || count > info.nbytes / el - first)
    fail(path, "elements [" + std::to_string(first) + ", +" + std::to_string(count) + ") of tensor " + shown(info.name) +
                   " (it has " + std::to_string(info.nbytes / el) + ")");
  const auto bytes = readGgufTensorBytes(path, file, info, first * el, count * el);
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (info.type == GgmlType::F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = info.type == GgmlType::F16 ? halfToFloat(h) : bf16ToFloat(h);
  }
  return out;
}

}  // namespace kvscope
