#include "core/gguf/gguf_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"

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

class ByteSource {
 public:
  ByteSource(std::ifstream& in, uint64_t size) : in_(in), size_(size) {}
  uint64_t left() const { return size_ - pos_; }
  uint64_t pos() const { return pos_; }
  void raw(void* p, uint64_t n, const char* what) {
    if (n > left()) throw Error(std::string("the file ends inside ") + what);
    in_.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (!in_) throw Error(std::string("read error inside ") + what);
    pos_ += n;
  }
  uint32_t u32(const char* what) { uint32_t v; raw(&v, 4, what); return v; }
  uint64_t u64(const char* what) { uint64_t v; raw(&v, 8, what); return v; }
  std::string str(const char* what) {
    const uint64_t n = u64(what);
    if (n > left() || n > kMaxString) throw Error(std::string(what) + ": string length " + std::to_string(n) + " exceeds the file");
    std::string s(n, '\0');
    raw(s.data(), n, what);
    return s;
  }

 private:
  std::ifstream& in_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

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

GgufType parseType(uint32_t raw, const std::string& key) {
  if (raw > static_cast<uint32_t>(GgufType::F64)) throw Error("metadata '" + key + "': unknown value type " + std::to_string(raw));
  return static_cast<GgufType>(raw);
}

void readElement(ByteSource& in, GgufType t, GgufValue& v, const std::string& key) {
  const char* what = "a metadata value";
  switch (t) {
    case GgufType::U8: { uint8_t b; in.raw(&b, 1, what); v.ints.push_back(b); return; }
    case GgufType::I8: { int8_t b; in.raw(&b, 1, what); v.ints.push_back(b); return; }
    case GgufType::BOOL: {
      uint8_t b; in.raw(&b, 1, what);
      if (b > 1) throw Error("metadata '" + key + "': bool value " + std::to_string(b));
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
        throw Error("metadata '" + key + "': u64 value above 2^63");
      v.ints.push_back(static_cast<int64_t>(u));
      return;
    }
    case GgufType::I64: v.ints.push_back(static_cast<int64_t>(in.u64(what))); return;
    case GgufType::F32: { float f; in.raw(&f, 4, what); v.floats.push_back(f); return; }
    case GgufType::F64: { double d; in.raw(&d, 8, what); v.floats.push_back(d); return; }
    case GgufType::STRING: v.strings.push_back(in.str(what)); return;
    case GgufType::ARRAY: break;
  }
  throw Error("metadata '" + key + "': arrays of arrays are not read");
}

GgufValue readValue(ByteSource& in, const std::string& key) {
  GgufValue v;
  const GgufType t = parseType(in.u32("a metadata type"), key);
  uint64_t n = 1;
  if (t == GgufType::ARRAY) {
    v.is_array = true;
    v.type = parseType(in.u32("an array type"), key);
    n = in.u64("an array length");
    if (n > kMaxCount || n * elementSize(v.type) > in.left())
      throw Error("metadata '" + key + "': array length " + std::to_string(n) + " exceeds the file");
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
  throw Error("tensor '" + name + "': ggml type " + std::to_string(raw) +
              " (quantized or unknown; only F32, F16 and BF16 are read)");
}

GgufTensorInfo readTensorInfo(ByteSource& in) {
  GgufTensorInfo t;
  t.name = in.str("a tensor name");
  const uint32_t n_dims = in.u32("a tensor's dimension count");
  if (n_dims < 1 || n_dims > 4) throw Error("tensor '" + t.name + "': " + std::to_string(n_dims) + " dimensions (1-4)");
  uint64_t count = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = in.u64("a tensor dimension");
    if (ne == 0 || ne > (uint64_t{1} << 40) || count > (uint64_t{1} << 40) / ne)
      throw Error("tensor '" + t.name + "': dimension " + std::to_string(ne) + " out of range");
    count *= ne;
    t.ne.push_back(ne);
  }
  t.type = parseGgmlType(in.u32("a tensor type"), t.name);
  t.offset = in.u64("a tensor offset");
  t.nbytes = count * ggmlTypeSize(t.type);
  return t;
}

void checkTensorPlacement(GgufFile& f) {
  std::vector<std::pair<uint64_t, const GgufTensorInfo*>> spans;
  for (const auto& t : f.tensors) {
    if (t.offset % f.alignment != 0) throw Error("tensor '" + t.name + "': offset " + std::to_string(t.offset) + " not aligned");
    if (t.offset > f.file_size - f.data_offset || t.nbytes > f.file_size - f.data_offset - t.offset)
      throw Error("tensor '" + t.name + "': data past the end of the file");
    spans.emplace_back(t.offset, &t);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto* prev = spans[i - 1].second;
    if (prev->offset + prev->nbytes > spans[i].first)
      throw Error("tensors '" + prev->name + "' and '" + spans[i].second->name + "' overlap");
  }
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
    const uint64_t n_tensors = src.u64("the tensor count");
    const uint64_t n_kv = src.u64("the metadata count");
    if (n_tensors > kMaxCount || n_kv > kMaxCount) throw Error("tensor or metadata count out of range");
    std::set<std::string> keys;
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key = src.str("a metadata key");
      if (!keys.insert(key).second) throw Error("metadata key '" + key + "' appears twice");
      GgufValue value = readValue(src, key);
      f.metadata.emplace_back(std::move(key), std::move(value));
    }
    if (const auto* a = f.find("general.alignment")) {
      if (a->is_array || a->type != GgufType::U32 || a->ints[0] == 0 || (a->ints[0] & (a->ints[0] - 1)) != 0)
        throw Error("general.alignment must be a u32 power of two");
      f.alignment = static_cast<uint64_t>(a->ints[0]);
    }
    std::set<std::string> names;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      auto t = readTensorInfo(src);
      if (!names.insert(t.name).second) throw Error("tensor '" + t.name + "' appears twice");
      f.tensors.push_back(std::move(t));
    }
    f.data_offset = alignUp(src.pos(), f.alignment);
    if (f.data_offset > f.file_size) throw Error("the data section starts past the end of the file");
    checkTensorPlacement(f);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return f;
}

std::vector<uint8_t> readGgufTensorBytes(const std::string& path, const GgufFile& file, const GgufTensorInfo& info) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::vector<uint8_t> bytes(info.nbytes);
  in.seekg(static_cast<std::streamoff>(file.data_offset + info.offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail(path, "reading tensor '" + info.name + "' failed");
  return bytes;
}

}  // namespace kvscope
