// Safetensors reader/writer: one test per malformed input (built byte by byte
// in a temp dir), writer round trips and atomicity, and the fixture models.
#include "core/model/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace fs = std::filesystem;

namespace kvscope {
namespace {

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xff);
  return out;
}

// 8-byte length, header, data.
std::string fileBytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kvscope-st-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string writeRaw(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  // Expects open() to throw an Error naming the path and containing each phrase.
  void expectOpenError(const std::string& p, const std::vector<std::string>& phrases) {
    expectError([&] { SafetensorsFile::open(p); }, p, phrases);
  }

  static void expectError(const std::function<void()>& fn, const std::string& p,
                          const std::vector<std::string>& phrases) {
    try {
      fn();
      ADD_FAILURE() << "no Error thrown for " << p;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(p), std::string::npos) << "path missing in: " << message;
      for (const auto& phrase : phrases)
        EXPECT_NE(message.find(phrase), std::string::npos)
            << "'" << phrase << "' missing in: " << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }

  std::string dir_;
};

// A small valid two-tensor file: a = F32 [2, 2] (16 bytes), b = I8 [4] (4 bytes).
const char* kTwoTensors =
    R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
    R"("b":{"dtype":"I8","shape":[4],"data_offsets":[16,20]}})";

TEST_F(SafetensorsTest, ValidHandBuiltFile) {
  const std::string p = writeRaw("ok.safetensors", fileBytes(kTwoTensors, std::string(20, 'x')));
  auto file = SafetensorsFile::open(p);
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "a");
  EXPECT_EQ(file->tensors()[1].name, "b");
  EXPECT_EQ(file->find("b")->dtype, StDType::I8);
  EXPECT_EQ(file->find("a")->numel(), 4u);
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_TRUE(file->metadata().empty());
  EXPECT_EQ(file->path(), p);
}

TEST_F(SafetensorsTest, EmptyFile) {
  expectOpenError(writeRaw("empty.safetensors", ""), {"empty"});
}

TEST_F(SafetensorsTest, TruncatedFile) {
  expectOpenError(writeRaw("short.safetensors", std::string("\x10\0\0\0\0", 5)), {"truncated"});

  // A valid file cut in the middle of its data.
  const std::string whole = fileBytes(kTwoTensors, std::string(20, 'x'));
  const std::string p = writeRaw("cut.safetensors", whole.substr(0, whole.size() - 10));
  expectOpenError(p, {"truncated", "'a'"});
}

TEST_F(SafetensorsTest, HeaderLengthPastEnd) {
  expectOpenError(writeRaw("past.safetensors", le64(1000) + "{}"), {"past the end of the file"});
}

TEST_F(SafetensorsTest, HeaderLengthZeroOrHuge) {
  expectOpenError(writeRaw("zero.safetensors", le64(0) + "{}"), {"header length is 0"});
  expectOpenError(writeRaw("huge.safetensors", le64(uint64_t{1} << 62) + "{}"),
                  {"exceeds the limit"});
  expectOpenError(writeRaw("max.safetensors", le64(~uint64_t{0}) + "{}"), {"exceeds the limit"});
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  expectOpenError(writeRaw("notjson.safetensors", fileBytes("{\"a\": [1, 2", "")),
                  {"header is not JSON"});
  expectOpenError(writeRaw("garbage.safetensors", fileBytes(std::string("\xff\xfe\0\x01", 4), "")),
                  {"header is not JSON"});
  // JSON, a NUL byte, then more: must not be read as just the first part.
  expectOpenError(writeRaw("nul.safetensors", fileBytes(std::string("{}\0{\"a\":1}", 10), "")),
                  {"header is not JSON", "NUL"});
}

TEST_F(SafetensorsTest, HeaderNotObject) {
  expectOpenError(writeRaw("array.safetensors", fileBytes("[1, 2, 3]", "")),
                  {"header is not a JSON object"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  const std::string header = R"({"w":{"dtype":"F8","shape":[4],"data_offsets":[0,4]}})";
  expectOpenError(writeRaw("dtype.safetensors", fileBytes(header, "abcd")),
                  {"unknown dtype 'F8'", "'w'"});
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[64,80]}})";
  expectOpenError(writeRaw("range.safetensors", fileBytes(header, std::string(32, 'x'))),
                  {"'b'", "[64, 80)", "out of range"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})";
  expectOpenError(writeRaw("overlap.safetensors", fileBytes(header, std::string(24, 'x'))),
                  {"overlap", "'a'", "'b'"});
}

TEST_F(SafetensorsTest, GappedTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[20,36]}})";
  expectOpenError(writeRaw("gap.safetensors", fileBytes(header, std::string(36, 'x'))),
                  {"gap", "'a'", "'b'", "[16, 20)"});
}

TEST_F(SafetensorsTest, GapAtStartOrEnd) {
  const std::string start = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})";
  expectOpenError(writeRaw("start.safetensors", fileBytes(start, std::string(20, 'x'))),
                  {"gap", "'a'", "[0, 4)"});
  const std::string end = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  expectOpenError(writeRaw("end.safetensors", fileBytes(end, std::string(20, 'x'))),
                  {"gap", "'a'", "[16, 20)"});
}

TEST_F(SafetensorsTest, ShapeSizeMismatch) {
  const std::string header = R"({"h.0.w":{"dtype":"F32","shape":[5,4],"data_offsets":[0,100]}})";
  const std::string p = writeRaw("mismatch.safetensors", fileBytes(header, std::string(100, 'x')));
  expectOpenError(p, {"tensor 'h.0.w' data_offsets [0, 100) do not match shape [5, 4] x F32 (80 bytes)"});
}

TEST_F(SafetensorsTest, ShapeOverflow) {
  const std::string header =
      R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
  expectOpenError(writeRaw("overflow.safetensors", fileBytes(header, "")),
                  {"'w'", "do not match shape", "overflow"});
}

TEST_F(SafetensorsTest, MissingDtypeField) {
  const std::string header = R"({"w":{"shape":[4],"data_offsets":[0,4]}})";
  expectOpenError(writeRaw("nodtype.safetensors", fileBytes(header, "abcd")),
                  {"'w'", "missing field 'dtype'"});
}

TEST_F(SafetensorsTest, MalformedEntries) {
  struct Case {
    const char* header;
    const char* phrase;
  };
  const Case cases[] = {
      {R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":1}})", "unexpected field 'x'"},
      {R"({"w":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", "not a non-negative integer"},
      {R"({"w":{"dtype":"U8","shape":[4.5],"data_offsets":[0,4]}})", "not a non-negative integer"},
      {R"({"w":{"dtype":"U8","shape":4,"data_offsets":[0,4]}})", "'shape' is not an array"},
      {R"({"w":{"dtype":7,"shape":[4],"data_offsets":[0,4]}})", "'dtype' is not a string"},
      {R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})", "begin after end"},
      {R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0]}})", "not a pair"},
      {R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,-4]}})", "not a pair"},
      {R"({"w":[1,2]})", "not a JSON object"},
      {R"({"__metadata__":{"k":1},"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
       "'__metadata__' value for 'k' is not a string"},
      {R"({"__metadata__":[],"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
       "'__metadata__' is not a JSON object"},
      {R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
       "duplicate tensor name 'w'"},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    expectOpenError(writeRaw("bad" + std::to_string(i++) + ".safetensors", fileBytes(c.header, "abcd")),
                    {c.phrase});
  }
}

TEST_F(SafetensorsTest, MissingFile) {
  expectOpenError(path("nope.safetensors"), {"cannot open"});
}

TEST_F(SafetensorsTest, ZeroSizeTensorsAndPaddedHeader) {
  // Zero-size tensors sit at begin == end, including at the very end; the
  // header may be padded with trailing spaces.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("z0":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
      R"("a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
      R"("z1":{"dtype":"F16","shape":[2,0,5],"data_offsets":[3,3]}})"
      "     ";
  auto file = SafetensorsFile::open(writeRaw("zero.safetensors", fileBytes(header, "xyz")));
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->find("z1")->numel(), 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->data(*file->find("a"))), 3), "xyz");
  EXPECT_EQ(file->metadata().at("format"), "pt");

  auto empty = SafetensorsFile::open(writeRaw("none.safetensors", fileBytes("{}", "")));
  EXPECT_TRUE(empty->tensors().empty());
}

TEST_F(SafetensorsTest, DTypeNamesAndSizes) {
  EXPECT_EQ(stDTypeSize(StDType::BF16), 2u);
  EXPECT_EQ(stDTypeSize(StDType::F64), 8u);
  EXPECT_STREQ(stDTypeName(StDType::BOOL), "BOOL");
  EXPECT_EQ(parseStDType("I16", "ctx"), StDType::I16);
  expectError([] { parseStDType("Q4", "ctx.safetensors"); }, "ctx.safetensors", {"unknown dtype 'Q4'"});
}

TEST_F(SafetensorsTest, RoundTripAllDtypes) {
  struct Spec {
    const char* name;
    StDType dtype;
    std::vector<int64_t> shape;
  };
  // Header order deliberately not alphabetical.
  const std::vector<Spec> specs = {
      {"z.f64", StDType::F64, {3}},       {"y.f32", StDType::F32, {2, 3}},
      {"x.f16", StDType::F16, {5}},       {"w.bf16", StDType::BF16, {1, 3}},
      {"v.i64", StDType::I64, {2}},       {"u.i32", StDType::I32, {2, 2}},
      {"t.i16", StDType::I16, {3}},       {"s.i8", StDType::I8, {7}},
      {"empty", StDType::F32, {4, 0}},    {"r.u8", StDType::U8, {2, 2, 2}},
      {"q.bool", StDType::BOOL, {3}},     {"scalar", StDType::F32, {}},
  };
  std::vector<std::string> buffers;
  std::vector<StWriteTensor> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t numel = 1;
    for (int64_t d : specs[i].shape) numel *= static_cast<uint64_t>(d);
    std::string bytes(numel * stDTypeSize(specs[i].dtype), '\0');
    for (size_t j = 0; j < bytes.size(); ++j) bytes[j] = static_cast<char>(i * 31 + j * 7 + 1);
    buffers.push_back(bytes);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    StWriteTensor t;
    t.name = specs[i].name;
    t.dtype = specs[i].dtype;
    t.shape = specs[i].shape;
    t.data = buffers[i].empty() ? nullptr : buffers[i].data();
    t.nbytes = buffers[i].size();
    tensors.push_back(t);
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round \"trip\""}};
  const std::string p = path("round.safetensors");
  writeSafetensors(p, tensors, metadata);

  const std::string raw = readAll(p);
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ((8 + n) % 8, 0u) << "header not 8-byte aligned";
  EXPECT_EQ(raw.substr(8, 16), R"({"__metadata__":)");

  auto file = SafetensorsFile::open(p);
  EXPECT_EQ(file->metadata(), metadata);
  ASSERT_EQ(file->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const StTensorInfo& info = file->tensors()[i];
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.name, specs[i].name);
    EXPECT_EQ(info.dtype, specs[i].dtype);
    EXPECT_EQ(info.shape, specs[i].shape);
    ASSERT_EQ(info.end - info.begin, buffers[i].size());
    EXPECT_EQ(std::memcmp(file->data(info), buffers[i].data(), buffers[i].size()), 0);
    EXPECT_EQ(file->find(specs[i].name), &info);
  }
  // No temp file left behind.
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos);

  // Without metadata the header has no "__metadata__" entry.
  const std::string p2 = path("nometa.safetensors");
  writeSafetensors(p2, {tensors[0]});
  EXPECT_EQ(readAll(p2).find("__metadata__"), std::string::npos);
  EXPECT_TRUE(SafetensorsFile::open(p2)->metadata().empty());
}

TEST_F(SafetensorsTest, WriterRefusesSizeMismatch) {
  const std::vector<float> values(5, 1.0f);
  StWriteTensor t{"w", StDType::F32, {2, 3}, values.data(), values.size() * sizeof(float)};
  const std::string p = path("bad.safetensors");
  expectError([&] { writeSafetensors(p, {t}); }, p, {"'w'", "20 bytes", "[2, 3] x F32", "24"});
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(SafetensorsTest, WriterRefusesDuplicateNames) {
  const float value = 1.0f;
  StWriteTensor t{"w", StDType::F32, {1}, &value, sizeof(value)};
  const std::string p = path("dup.safetensors");
  expectError([&] { writeSafetensors(p, {t, t}); }, p, {"duplicate tensor name 'w'"});
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(SafetensorsTest, AtomicWriteFailureLeavesNoTrace) {
  const float values[2] = {1.0f, 2.0f};
  StWriteTensor good{"w", StDType::F32, {2}, values, sizeof(values)};

  // Target directory does not exist.
  const std::string missing = path("no-such-dir/model.safetensors");
  expectError([&] { writeSafetensors(missing, {good}); }, missing, {"cannot create temp file"});
  EXPECT_FALSE(fs::exists(path("no-such-dir")));

  // An existing file survives a write that fails validation.
  const std::string p = path("model.safetensors");
  writeSafetensors(p, {good}, {{"version", "1"}});
  const std::string before = readAll(p);
  StWriteTensor bad = good;
  bad.nbytes = 4;
  expectError([&] { writeSafetensors(p, {bad}); }, p, {"needs 8"});
  EXPECT_EQ(readAll(p), before);
  EXPECT_EQ(SafetensorsFile::open(p)->metadata().at("version"), "1");

  // A failure after the temp file was written (rename over a non-empty
  // directory) removes the temp file and leaves the directory alone.
  const std::string blocker = path("blocker.safetensors");
  fs::create_directory(blocker);
  writeRaw("blocker.safetensors/keep", "keep");
  expectError([&] { writeSafetensors(blocker, {good}); }, blocker, {"cannot rename"});
  EXPECT_TRUE(fs::is_directory(blocker));
  EXPECT_EQ(readAll(blocker + "/keep"), "keep");

  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
        << "left behind: " << entry.path();

  // A successful overwrite replaces the old content.
  writeSafetensors(p, {good}, {{"version", "2"}});
  EXPECT_EQ(SafetensorsFile::open(p)->metadata().at("version"), "2");
}

TEST_F(SafetensorsTest, FixtureModelsMatchManifest) {
  const fs::path fixtures = KVSCOPE_FIXTURES;
  std::ifstream in(fixtures / "manifest.json");
  ASSERT_TRUE(in) << "cannot read manifest.json";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const auto& models = manifest.at("models");
  ASSERT_FALSE(models.empty());
  int checked = 0;
  for (const auto& [model, entry] : models.items()) {
    SCOPED_TRACE(model);
    size_t tensors_seen = 0;
    for (const auto& file_name : entry.at("safetensors_files")) {
      const std::string name = file_name.get<std::string>();
      const fs::path p = fixtures / "models" / model / name;
      auto file = SafetensorsFile::open(p.string());
      // Inventory of this file according to the manifest.
      size_t expected_here = 0;
      for (const auto& [tensor, info] : entry.at("tensors").items())
        if (info.at("file") == name) ++expected_here;
      EXPECT_EQ(file->tensors().size(), expected_here);
      for (const auto& info : file->tensors()) {
        SCOPED_TRACE(info.name);
        ASSERT_TRUE(entry.at("tensors").contains(info.name)) << "not in the manifest";
        const auto& expected = entry.at("tensors").at(info.name);
        EXPECT_EQ(expected.at("file"), name);
        EXPECT_EQ(stDTypeName(info.dtype), expected.at("dtype").get<std::string>());
        EXPECT_EQ(info.shape, expected.at("shape").get<std::vector<int64_t>>());
        ++tensors_seen;
      }
      if (entry.contains("safetensors_metadata") && entry["safetensors_metadata"].contains(name)) {
        EXPECT_EQ(file->metadata(),
                  (entry["safetensors_metadata"][name].get<std::map<std::string, std::string>>()));
      }
    }
    EXPECT_EQ(tensors_seen, entry.at("num_tensors").get<size_t>());
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // Every fixture model on disk is in the manifest (and so was checked above).
  for (const auto& dir : fs::directory_iterator(fixtures / "models")) {
    if (fs::exists(dir.path() / "model.safetensors")) {
      EXPECT_TRUE(models.contains(dir.path().filename().string())) << dir.path();
    }
  }
}

}  // namespace
}  // namespace kvscope
