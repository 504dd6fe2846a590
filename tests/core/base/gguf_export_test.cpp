// export-gguf: every exported family read back with kvscope's own
// GGUF reader and checked against the checkpoint it came from: header,
// architecture metadata, tokenizer metadata, tensor names, shapes, types,
// offsets, and the bytes of the tensors the exporter transforms (Llama's Q/K
// interleave, Gemma's 1 + w norms and folded query scale, GPT-2's Conv1D
// transposes). Refusals name the reason. llama.cpp itself loads the same
// files in tests/llamacpp (CTest llamacpp_*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/gguf/gguf_export.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_weights.h"
#include "core/model/model_config.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(KVSCOPE_FIXTURES) + "/models/";
const std::string kBundled = std::string(KVSCOPE_FIXTURES) + "/../../resources/models/";

class GgufExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvscope-gguf-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string out(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::vector<float> floatsOf(const std::string& path, const GgufFile& f, const std::string& name) {
  const auto* info = f.tensor(name);
  EXPECT_NE(info, nullptr) << name;
  if (!info) return {};
  const auto bytes = readGgufTensorBytes(path, f, *info);
  std::vector<float> v(info->nbytes / ggmlTypeSize(info->type));
  if (info->type == GgmlType::F32) {
    std::memcpy(v.data(), bytes.data(), bytes.size());
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = halfToFloat(h);
    }
  }
  return v;
}

// Every tensor: ggml order is the reverse of the checkpoint's row-major shape,
// F32/F16 as asked (1-D tensors stay F32), aligned offsets in file order with
// no overlap, and the data section ends at the end of the file.
void expectLayout(const std::string& path, const GgufFile& f, GgufExportDType dtype) {
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  uint64_t expected_offset = 0;
  for (const auto& t : f.tensors) {
    EXPECT_EQ(t.offset, expected_offset) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    expected_offset = (t.offset + t.nbytes + 31) / 32 * 32;
    const bool matrix = t.ne.size() >= 2;
    EXPECT_EQ(t.type, matrix && dtype == GgufExportDType::F16 ? GgmlType::F16 : GgmlType::F32) << t.name;
  }
  EXPECT_EQ(f.data_offset + expected_offset, fs::file_size(path));
}

TEST_F(GgufExportTest, LlamaTinyHeaderMetadataAndInterleavedQK) {
  const std::string path = out("llama-tiny.gguf");
  const auto report = exportGguf(kModels + "llama-tiny", path, GgufExportDType::F32);
  EXPECT_EQ(report.architecture, "llama");
  const GgufFile f = readGguf(path);
  expectLayout(path, f, GgufExportDType::F32);
  EXPECT_EQ(f.text("general.architecture"), "llama");
  EXPECT_EQ(f.integer("llama.block_count"), 2);
  EXPECT_EQ(f.integer("llama.embedding_length"), 64);
  EXPECT_EQ(f.integer("llama.attention.head_count"), 4);
  EXPECT_EQ(f.integer("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.integer("llama.feed_forward_length"), 176);
  EXPECT_EQ(f.integer("llama.context_length"), 256);
  EXPECT_EQ(f.integer("llama.rope.dimension_count"), 16);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("llama.rope.freq_base")), 10000.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  // sentencepiece-style vocabulary: pieces, scores, byte tokens, specials
  EXPECT_EQ(f.text("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.integer("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.integer("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.integer("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f.find("tokenizer.ggml.add_bos_token")->ints[0], 1);
  EXPECT_EQ(f.find("tokenizer.ggml.add_space_prefix")->ints[0], 1);
  const auto& tokens = f.find("tokenizer.ggml.tokens")->strings;
  const auto& types = f.find("tokenizer.ggml.token_type")->ints;
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(types[3], 6);  // byte
  EXPECT_EQ(types[1], 3);  // control
  EXPECT_EQ(types[0], 2);  // unknown
  EXPECT_EQ(tokens[259], "\xE2\x96\x81t");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->floats[259], -1.0);  // the first merge
  // tensors: 2 + 9 per layer + output (untied)
  EXPECT_EQ(f.tensors.size(), 21u);
  const auto* q = f.tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight")->ne, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f.tensor("token_embd.weight")->ne, (std::vector<uint64_t>{64, 512}));
  EXPECT_NE(f.tensor("output.weight"), nullptr);
  // K rows interleaved per head: GGUF row 2i of a head is HF row i, row 2i+1 is HF row i + d/2.
  const auto hf = WeightFiles::open(kModels + "llama-tiny").load("model.layers.1.self_attn.k_proj.weight");
  const auto k = floatsOf(path, f, "blk.1.attn_k.weight");
  const int64_t d = 16, width = 64;
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int64_t c = 0; c < width; ++c) {
        ASSERT_EQ(k[((head * d) + 2 * i) * width + c], hf.data[((head * d) + i) * width + c]);
        ASSERT_EQ(k[((head * d) + 2 * i + 1) * width + c], hf.data[((head * d) + i + d / 2) * width + c]);
      }
  // V is not interleaved
  EXPECT_EQ(floatsOf(path, f, "blk.0.attn_v.weight"),
            WeightFiles::open(kModels + "llama-tiny").load("model.layers.0.self_attn.v_proj.weight").data);
}

TEST_F(GgufExportTest, BundledPairAsF16) {
  for (const char* role : {"target", "drafter"}) {
    const std::string path = out(std::string(role) + ".gguf");
    exportGguf(kBundled + role, path, GgufExportDType::F16);
    const GgufFile f = readGguf(path);
    expectLayout(path, f, GgufExportDType::F16);
    EXPECT_EQ(f.text("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.text("tokenizer.ggml.pre"), "smaug-bpe");  // Llama 3's regex, every merge applied
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings.size(), 2048u);
    EXPECT_EQ(f.integer("tokenizer.ggml.bos_token_id"), 2046);
    EXPECT_EQ(f.find("tokenizer.ggml.add_bos_token")->ints[0], 1);
    EXPECT_EQ(f.tensor("output.weight"), nullptr);  // tied: llama.cpp reuses token_embd
    // f16 values round to nearest
    const auto hf = WeightFiles::open(kBundled + role).load("model.layers.0.mlp.down_proj.weight");
    const auto g = floatsOf(path, f, "blk.0.ffn_down.weight");
    ASSERT_EQ(g.size(), hf.data.size());
    for (size_t i = 0; i < g.size(); i += 97) EXPECT_NEAR(g[i], hf.data[i], std::fabs(hf.data[i]) * 1e-3 + 1e-7);
  }
}

TEST_F(GgufExportTest, EveryFixtureFamilyReadsBack) {
  struct Case {
    const char* model;
    const char* arch;
    const char* pre;
    size_t tensors;
    const char* probe;  // a tensor only this family has
  };
  const Case cases[] = {
      {"gpt2-tiny", "gpt2", "gpt-2", 28, "position_embd.weight"},
      {"qwen2-tiny", "qwen2", "qwen2", 26, "blk.0.attn_q.bias"},
      {"qwen3-tiny", "qwen3", "qwen2", 35, "blk.2.attn_k_norm.weight"},
      {"gemma2-tiny", "gemma2", "gpt-2", 46, "blk.3.post_ffw_norm.weight"},
      {"phi3-tiny", "phi3", "gpt-2", 21, "blk.0.attn_qkv.weight"},
      {"phi3-longrope-tiny", "phi3", "gpt-2", 23, "rope_factors_long.weight"},
      {"llama-tiny-draft", "llama", "default", 12, "blk.0.ffn_gate.weight"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.model);
    const std::string path = out(std::string(c.model) + ".gguf");
    const auto report = exportGguf(kModels + c.model, path, GgufExportDType::F32);
    const GgufFile f = readGguf(path);
    expectLayout(path, f, GgufExportDType::F32);
    EXPECT_EQ(f.text("general.architecture"), c.arch);
    EXPECT_EQ(report.architecture, c.arch);
    EXPECT_EQ(f.text("tokenizer.ggml.pre"), c.pre);
    EXPECT_EQ(f.tensors.size(), c.tensors);
    EXPECT_NE(f.tensor(c.probe), nullptr);
    const ModelConfig config = loadModelConfig(kModels + c.model + "/config.json");
    EXPECT_EQ(f.integer(std::string(c.arch) + ".block_count"), config.num_layers);
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings.size(), static_cast<size_t>(config.vocab_size));
    EXPECT_EQ(f.tensor("token_embd.weight")->ne, (std::vector<uint64_t>{static_cast<uint64_t>(config.hidden_size),
                                                                           static_cast<uint64_t>(config.vocab_size)}));
  }
}

TEST_F(GgufExportTest, Qwen3PadsTheVocabularyToTheEmbeddingRows) {
  const std::string path = out("q3.gguf");
  exportGguf(kModels + "qwen3-tiny", path, GgufExportDType::F32);
  const GgufFile f = readGguf(path);
  const auto& tokens = f.find("tokenizer.ggml.tokens")->strings;
  ASSERT_EQ(tokens.size(), 512u);  // tokenizer 448, embedding 512
  EXPECT_EQ(tokens[500], "[PAD500]");
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->ints[500], 5);  // unused
  EXPECT_EQ(f.integer("qwen3.attention.key_length"), 32);
}

TEST_F(GgufExportTest, Gemma2NormsAndQueryScale) {
  const std::string path = out("g2.gguf");
  exportGguf(kModels + "gemma2-tiny", path, GgufExportDType::F32);
  const GgufFile f = readGguf(path);
  EXPECT_EQ(f.integer("gemma2.attention.sliding_window"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("gemma2.attn_logit_softcapping")), 6.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("gemma2.final_logit_softcapping")), 10.0f);
  const auto w = WeightFiles::open(kModels + "gemma2-tiny");
  const auto norm = w.load("model.layers.0.pre_feedforward_layernorm.weight");
  const auto g = floatsOf(path, f, "blk.0.ffn_norm.weight");
  for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(g[i], norm.data[i] + 1.0f);
  // query_pre_attn_scalar 24, head_dim 16: llama.cpp's 1/sqrt(16) times sqrt(16/24) is 1/sqrt(24)
  const auto q = w.load("model.layers.2.self_attn.q_proj.weight");
  const auto gq = floatsOf(path, f, "blk.2.attn_q.weight");
  for (size_t i = 0; i < gq.size(); i += 13) EXPECT_NEAR(gq[i], q.data[i] * std::sqrt(16.0 / 24.0), 1e-7);
}

TEST_F(GgufExportTest, Gpt2Conv1DWeightsAreTransposed) {
  const std::string path = out("gpt2.gguf");
  exportGguf(kModels + "gpt2-tiny", path, GgufExportDType::F32);
  const GgufFile f = readGguf(path);
  const auto* qkv = f.tensor("blk.0.attn_qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->ne, (std::vector<uint64_t>{64, 192}));  // [out=192 rows, in=64] row-major
  const auto hf = WeightFiles::open(kModels + "gpt2-tiny").load("transformer.h.0.attn.c_attn.weight");  // [64, 192]
  const auto g = floatsOf(path, f, "blk.0.attn_qkv.weight");
  for (int64_t o = 0; o < 192; o += 7)
    for (int64_t i = 0; i < 64; i += 5) ASSERT_EQ(g[o * 64 + i], hf.data[i * 192 + o]);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("gpt2.attention.layer_norm_epsilon")), 1e-5f);
}

void expectExportRefused(const std::string& model_dir, const std::string& out_path, const std::string& part) {
  try {
    exportGguf(model_dir, out_path, GgufExportDType::F32);
    ADD_FAILURE() << "exported " << model_dir;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out_path));
  EXPECT_FALSE(fs::exists(out_path + ".partial"));
}

TEST_F(GgufExportTest, MistralWithASlidingWindowIsRefusedByName) {
  expectExportRefused(kModels + "mistral-sw-tiny", out("m.gguf"), "sliding_window 16");
}

// A copy of a fixture with config.json or tokenizer.json edited.
fs::path editedCopy(const fs::path& dir, const std::string& model, const std::string& file,
                    const std::string& from, const std::string& to) {
  const fs::path copy = dir / (model + "-edited");
  fs::create_directories(copy);
  for (const auto& e : fs::directory_iterator(kModels + model)) fs::copy_file(e.path(), copy / e.path().filename());
  std::ifstream in(copy / file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  std::ofstream(copy / file, std::ios::trunc) << text;
  return copy;
}

TEST_F(GgufExportTest, MistralWithoutAWindowExportsAsLlama) {
  const auto dir = editedCopy(dir_, "mistral-sw-tiny", "config.json", "\"sliding_window\": 16", "\"sliding_window\": null");
  const std::string path = out("m.gguf");
  EXPECT_EQ(exportGguf(dir.string(), path, GgufExportDType::F32).architecture, "llama");
  EXPECT_EQ(readGguf(path).text("general.architecture"), "llama");
}

TEST_F(GgufExportTest, UnsupportedModelTypeIsRefusedByName) {
  const auto dir = editedCopy(dir_, "llama-tiny", "config.json", "\"model_type\": \"llama\"", "\"model_type\": \"falcon\"");
  expectExportRefused(dir.string(), out("f.gguf"), "falcon");
}

TEST_F(GgufExportTest, TokenizersLlamaCppWouldSplitDifferentlyAreRefused) {
  // GPT-2's byte-level pre-tokenizer with add_prefix_space: llama.cpp prepends nothing.
  auto dir = editedCopy(dir_, "gpt2-tiny", "tokenizer.json", "\"add_prefix_space\": false",  // the first: the pre_tokenizer's
                        "\"add_prefix_space\": true");
  expectExportRefused(dir.string(), out("a.gguf"), "add_prefix_space");
  fs::remove_all(dir);
  // Qwen2's regex changed to one no llama.cpp pre-tokenizer implements.
  dir = editedCopy(dir_, "qwen2-tiny", "tokenizer.json", "\\\\p{N}|", "\\\\p{N}{1,2}|");
  expectExportRefused(dir.string(), out("b.gguf"), "regex llama.cpp has no pre-tokenizer for");
  fs::remove_all(dir);
  // A sentencepiece-style vocabulary with a concatenation that is not a merge.
  dir = editedCopy(dir_, "llama-tiny", "tokenizer.json", "\"\xE2\x96\x81 t\",", "");
  expectExportRefused(dir.string(), out("c.gguf"), "is not a merge");
}

// ---- the reader on hostile files ----

void writeBytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string u32le(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64le(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

void expectReadRefused(const std::string& path, const std::string& part) {
  try {
    readGguf(path);
    ADD_FAILURE() << "read " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(GgufExportTest, ReaderRefusesHostileHeadersBeforeAllocating) {
  const std::string head = "GGUF" + u32le(3);
  writeBytes(out("magic.gguf"), "GGML" + u32le(3) + u64le(0) + u64le(0));
  expectReadRefused(out("magic.gguf"), "bad magic");
  writeBytes(out("version.gguf"), "GGUF" + u32le(9) + u64le(0) + u64le(0));
  expectReadRefused(out("version.gguf"), "version 9");
  writeBytes(out("count.gguf"), head + u64le(uint64_t{1} << 62) + u64le(0));
  expectReadRefused(out("count.gguf"), "tensor count 4611686018427387904 exceeds");
  // a key whose length claims 2^40 bytes
  writeBytes(out("key.gguf"), head + u64le(0) + u64le(1) + u64le(uint64_t{1} << 40) + std::string(16, 'k'));
  expectReadRefused(out("key.gguf"), "string length 1099511627776 exceeds the 16 bytes left");
  // an array of 2^23 strings in a few bytes
  writeBytes(out("array.gguf"), head + u64le(0) + u64le(1) + u64le(1) + "k" + u32le(9) + u32le(8) + u64le(uint64_t{1} << 23));
  expectReadRefused(out("array.gguf"), "array of 8388608 string elements exceeds the 0 bytes left");
  // a quantized tensor
  writeBytes(out("q4.gguf"), head + u64le(1) + u64le(0) + u64le(1) + "t" + u32le(1) + u64le(32) + u32le(2) + u64le(0) +
                                 std::string(64, '\0'));
  expectReadRefused(out("q4.gguf"), "ggml type 2");
  // a tensor past the end of the file
  writeBytes(out("short.gguf"), head + u64le(1) + u64le(0) + u64le(1) + "t" + u32le(1) + u64le(1000) + u32le(0) + u64le(0) +
                                    std::string(64, '\0'));
  expectReadRefused(out("short.gguf"), "past the end of the file");
}

}  // namespace
}  // namespace kvscope
