// llama.cpp's sequence-state layout: the reader on states built
// here byte by byte as llama_state_seq_save_file writes them, and on hostile
// ones. Real states written by llama.cpp are read in the llamacpp_capture_*
// tests (node-llama-cpp's saveStateToFile).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/capture/llamacpp_state.h"
#include "core/error.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

class Bytes {
 public:
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& i32(int32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& raw(const void* p, size_t n) {
    s.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string s;
};

// Two cells (positions 0 and 1), one layer, one kv head of dim 4, F32.
// K row of cell c: 10c + j; V value j of cell c: 100 + 10c + j.
Bytes state(bool v_trans, int32_t k_type = 0, uint32_t version = 3) {
  Bytes b;
  b.u32(0x67677371).u32(version).u32(2).i32(1).i32(5);  // magic, version, tokens
  b.u32(1).u32(2);                                         // streams, cells
  for (int32_t c = 0; c < 2; ++c) b.i32(c).u32(1).i32(0);  // pos, one seq id: 0
  b.u32(v_trans ? 1 : 0).u32(1);
  b.i32(k_type).u64(16);
  for (int c = 0; c < 2; ++c)
    for (int j = 0; j < 4; ++j) b.f32(static_cast<float>(10 * c + j));
  if (v_trans) {
    b.i32(0).u32(4).u32(4);
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 2; ++c) b.f32(static_cast<float>(100 + 10 * c + j));
  } else {
    b.i32(0).u64(16);
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 4; ++j) b.f32(static_cast<float>(100 + 10 * c + j));
  }
  return b;
}

class LlamaStateTest : public ::testing::Test {
 protected:
  std::string write(const std::string& bytes) {
    const auto path = fs::temp_directory_path() / ("kvscope-state-" + std::to_string(::getpid()) + "-" + std::to_string(n_++));
    std::ofstream(path, std::ios::binary) << bytes;
    paths_.push_back(path);
    return path.string();
  }
  void TearDown() override {
    for (const auto& p : paths_) fs::remove(p);
  }
  const LlamaStateShape shape_{{1}, 4};
  std::vector<fs::path> paths_;
  int n_ = 0;
};

float at(const std::vector<uint8_t>& bytes, size_t i) {
  float f;
  std::memcpy(&f, bytes.data() + 4 * i, 4);
  return f;
}

TEST_F(LlamaStateTest, ReadsCellsAndRowsWithTransposedOrPlainV) {
  for (const bool v_trans : {true, false}) {
    const auto st = readLlamaSeqState(write(state(v_trans).s), shape_);
    EXPECT_EQ(st.version, 3u);
    EXPECT_EQ(st.tokens, (std::vector<int32_t>{1, 5}));
    ASSERT_EQ(st.caches.size(), 1u);
    EXPECT_EQ(st.caches[0].positions, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(st.caches[0].v_trans, v_trans);
    const auto& layer = st.caches[0].layers.at(0);
    EXPECT_EQ(layer.k_type, LlamaCacheType::F32);
    for (size_t c = 0; c < 2; ++c)
      for (size_t j = 0; j < 4; ++j) {
        EXPECT_EQ(at(layer.k, c * 4 + j), 10.0f * c + j);
        EXPECT_EQ(at(layer.v, c * 4 + j), 100.0f + 10.0f * c + j);  // rows, whatever the stored layout
      }
  }
}

void expectRefused(const std::string& path, const LlamaStateShape& shape, const std::string& part) {
  try {
    readLlamaSeqState(path, shape);
    ADD_FAILURE() << "read " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(LlamaStateTest, RefusesWhatItCannotReadByName) {
  Bytes bad_magic;
  bad_magic.u32(0x6767736e).u32(3).u32(0);  // a whole-context session file
  expectRefused(write(bad_magic.s), shape_, "magic");
  expectRefused(write(state(true, 0, 2).s), shape_, "version 2");
  expectRefused(write(state(true, 8).s), shape_, "q8_0");
  expectRefused(write(state(true).s + "x"), shape_, "1 bytes after the last cache");
  expectRefused(write(state(true).s), LlamaStateShape{{2}, 4}, "1 layers where the model has 2");
  expectRefused(write(state(true).s), LlamaStateShape{{1}, 8}, "need 32");
  expectRefused(write(state(true).s), LlamaStateShape{{1, 1}, 4}, "cache 1");  // an iSWA model's second cache is missing
  const std::string full = state(false).s;
  expectRefused(write(full.substr(0, full.size() - 3)), shape_, "ends inside");
}

TEST_F(LlamaStateTest, HugeCountsAreRefusedBeforeAllocating) {
  Bytes b;
  b.u32(0x67677371).u32(3).u32(0x7fffffff);
  expectRefused(write(b.s), shape_, "tokens do not fit");
  Bytes c;
  c.u32(0x67677371).u32(3).u32(0).u32(1).u32(0xffffffff);
  expectRefused(write(c.s), shape_, "cells do not fit");
  Bytes d;
  d.u32(0x67677371).u32(3).u32(0).u32(100000);
  expectRefused(write(d.s), shape_, "100000 streams");
}

}  // namespace
}  // namespace kvscope
