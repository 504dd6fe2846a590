#include "core/capture/llamacpp_state.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace kvscope {

namespace {

constexpr uint32_t kMagic = 0x67677371;  // 'ggsq'
constexpr uint32_t kVersion = 3;
constexpr uint32_t kMaxStreams = 256;
constexpr uint32_t kMaxSeqIds = 256;
constexpr uint64_t kMaxStateBytes = uint64_t{1} << 34;

class Reader {
 public:
  explicit Reader(std::vector<uint8_t> bytes) : b_(std::move(bytes)) {}
  uint64_t left() const { return b_.size() - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > left()) throw Error("the state ends inside " + what);
  }
  template <typename T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::vector<uint8_t> take(uint64_t n, const std::string& what) {
    need(n, what);
    std::vector<uint8_t> out(b_.begin() + static_cast<std::ptrdiff_t>(pos_), b_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return out;
  }
  const uint8_t* at(uint64_t n, const std::string& what) {
    need(n, what);
    const uint8_t* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  std::vector<uint8_t> b_;
  uint64_t pos_ = 0;
};

LlamaCacheType cacheType(int32_t ggml, const std::string& what) {
  if (ggml == 0) return LlamaCacheType::F32;
  if (ggml == 1) return LlamaCacheType::F16;
  if (ggml == 30) return LlamaCacheType::BF16;
  static const std::pair<int32_t, const char*> kNames[] = {{2, "q4_0"}, {3, "q4_1"}, {6, "q5_0"}, {7, "q5_1"}, {8, "q8_0"},
                                                           {9, "q8_1"}, {20, "iq4_nl"}};
  std::string name = "ggml type " + std::to_string(ggml);
  for (const auto& [id, n] : kNames)
    if (id == ggml) name += " (" + std::string(n) + ")";
  throw Error(what + " is " + name + ": only F32, F16 and BF16 caches are read (a quantized cache is not)");
}

uint64_t typeSize(LlamaCacheType t) { return t == LlamaCacheType::F32 ? 4 : 2; }

std::vector<int32_t> readCells(Reader& r, uint32_t cells) {
  if (static_cast<uint64_t>(cells) * 8 > r.left()) throw Error(std::to_string(cells) + " cells do not fit in the state");
  std::vector<int32_t> positions(cells);
  for (uint32_t i = 0; i < cells; ++i) {
    positions[i] = r.get<int32_t>("a cell's position");
    if (positions[i] < 0) throw Error("cell " + std::to_string(i) + " has position " + std::to_string(positions[i]));
    const uint32_t n_seq = r.get<uint32_t>("a cell's sequence count");
    if (n_seq > kMaxSeqIds) throw Error("cell " + std::to_string(i) + " claims " + std::to_string(n_seq) + " sequences");
    for (uint32_t s = 0; s < n_seq; ++s) r.get<int32_t>("a cell's sequence id");
  }
  return positions;
}

std::vector<uint8_t> readRows(Reader& r, uint32_t cells, uint64_t width, const std::string& what, LlamaCacheType& type) {
  type = cacheType(r.get<int32_t>(what + " type"), what);
  const uint64_t row = r.get<uint64_t>(what + " row size");
  if (row != width * typeSize(type))
    throw Error(what + " rows are " + std::to_string(row) + " bytes; the model's " + std::to_string(width) + " values of " +
                llamaCacheTypeName(type) + " need " + std::to_string(width * typeSize(type)));
  return r.take(row * cells, what + " rows");
}

// V stored transposed (flash attention off): per value of the width, the cells.
std::vector<uint8_t> readTransposedV(Reader& r, uint32_t cells, uint64_t width, const std::string& what, LlamaCacheType& type) {
  type = cacheType(r.get<int32_t>(what + " type"), what);
  const uint32_t el = r.get<uint32_t>(what + " element size");
  const uint32_t w = r.get<uint32_t>(what + " width");
  if (el != typeSize(type) || w != width)
    throw Error(what + ": element size " + std::to_string(el) + " and width " + std::to_string(w) + " where the model needs " +
                std::to_string(typeSize(type)) + " and " + std::to_string(width));
  const uint8_t* src = r.at(uint64_t{el} * w * cells, what + " values");
  std::vector<uint8_t> rows(uint64_t{el} * w * cells);
  for (uint64_t j = 0; j < w; ++j)
    for (uint64_t c = 0; c < cells; ++c) std::memcpy(rows.data() + (c * w + j) * el, src + (j * cells + c) * el, el);
  return rows;
}

LlamaStateCache readCache(Reader& r, int64_t layers, int64_t width, size_t index) {
  const std::string name = "cache " + std::to_string(index);
  const uint32_t streams = r.get<uint32_t>(name + " stream count");
  if (streams == 0 || streams > kMaxStreams) throw Error(name + ": " + std::to_string(streams) + " streams");
  LlamaStateCache cache;
  bool seen = false;
  for (uint32_t s = 0; s < streams; ++s) {
    const uint32_t cells = r.get<uint32_t>(name + " cell count");
    if (cells == 0) continue;
    if (seen) throw Error(name + ": the sequence's cells are in two streams");
    seen = true;
    cache.positions = readCells(r, cells);
    const uint32_t v_trans = r.get<uint32_t>(name + " v_trans");
    const uint32_t n_layer = r.get<uint32_t>(name + " layer count");
    if (v_trans > 1) throw Error(name + ": v_trans " + std::to_string(v_trans));
    if (n_layer != layers) throw Error(name + " has " + std::to_string(n_layer) + " layers where the model has " + std::to_string(layers));
    cache.v_trans = v_trans == 1;
    cache.layers.resize(n_layer);
    for (uint32_t l = 0; l < n_layer; ++l)
      cache.layers[l].k = readRows(r, cells, static_cast<uint64_t>(width), name + " layer " + std::to_string(l) + " K", cache.layers[l].k_type);
    for (uint32_t l = 0; l < n_layer; ++l) {
      const std::string what = name + " layer " + std::to_string(l) + " V";
      cache.layers[l].v = cache.v_trans ? readTransposedV(r, cells, static_cast<uint64_t>(width), what, cache.layers[l].v_type)
                                        : readRows(r, cells, static_cast<uint64_t>(width), what, cache.layers[l].v_type);
    }
  }
  if (!seen) cache.layers.assign(static_cast<size_t>(layers), LlamaStateLayer{});
  return cache;
}

std::vector<uint8_t> fileBytes(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("cannot read it");
  if (size > kMaxStateBytes) throw Error("larger than 16 GiB");
  std::vector<uint8_t> bytes(size);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) throw Error("read error");
  return bytes;
}

}  // namespace

const char* llamaCacheTypeName(LlamaCacheType type) {
  switch (type) {
    case LlamaCacheType::F32: return "F32";
    case LlamaCacheType::F16: return "F16";
    case LlamaCacheType::BF16: return "BF16";
  }
  return "?";
}

LlamaSeqState readLlamaSeqState(const std::string& path, const LlamaStateShape& shape) {
  LlamaSeqState state;
  try {
    Reader r(fileBytes(path));
    if (r.get<uint32_t>("the magic") != kMagic) throw Error("not a llama.cpp sequence state (magic is not 'ggsq')");
    state.version = r.get<uint32_t>("the version");
    if (state.version != kVersion)
      throw Error("sequence state version " + std::to_string(state.version) + " (version 3 is read: llama.cpp's LLAMA_STATE_SEQ_VERSION)");
    const uint32_t n_tokens = r.get<uint32_t>("the token count");
    if (uint64_t{n_tokens} * 4 > r.left()) throw Error(std::to_string(n_tokens) + " tokens do not fit in the state");
    for (uint32_t i = 0; i < n_tokens; ++i) state.tokens.push_back(r.get<int32_t>("a token"));
    for (size_t c = 0; c < shape.cache_layers.size(); ++c) state.caches.push_back(readCache(r, shape.cache_layers[c], shape.kv_width, c));
    if (r.left() != 0) throw Error(std::to_string(r.left()) + " bytes after the last cache (another model's state, or an unknown layout)");
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return state;
}

}  // namespace kvscope
