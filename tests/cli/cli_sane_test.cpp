// Through the CLI: inputs that used to validate and then compute
// garbage (NaN logits, then token 0 forever) or die in the allocator with
// "internal error" are refused by name: exit 2, the field, tensor or layer in
// stderr, never "internal error", quickly and without a large allocation.
#include <sys/resource.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <limits>

#include "cli_test_support.h"
#include "core/model/safetensors.h"

namespace kvscope::cli_test {
namespace {

// A copy of a fixture model directory with config.json edited.
std::string copiedModel(const ScratchDir& dir, const std::string& fixture, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path out = dir.file(fixture);
  fs::create_directories(out);
  for (const auto& entry : fs::directory_iterator(modelDir(fixture))) fs::copy_file(entry.path(), out / entry.path().filename());
  nlohmann::json config = readJson(out / "config.json");
  edit(config);
  std::ofstream(out / "config.json", std::ios::trunc) << config.dump(2);
  return out.string();
}

// Rewrites one tensor of the copy's model.safetensors as all NaN.
void poisonTensor(const std::string& model, const std::string& name) {
  const std::string path = (fs::path(model) / "model.safetensors").string();
  std::vector<StWriteTensor> tensors;
  std::vector<std::vector<char>> bytes;
  {
    const auto st = SafetensorsFile::open(path);
    for (const StTensorInfo& info : st->tensors()) {
      const auto* data = reinterpret_cast<const char*>(st->data(info));
      bytes.emplace_back(data, data + (info.end - info.begin));
      if (info.name == name) {
        ASSERT_EQ(info.dtype, StDType::F32) << "the fixture's weights are float32";
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (size_t i = 0; i + sizeof nan <= bytes.back().size(); i += sizeof nan) std::memcpy(bytes.back().data() + i, &nan, sizeof nan);
      }
      tensors.push_back({info.name, info.dtype, info.shape, nullptr, bytes.back().size()});
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = bytes[i].data();
  writeSafetensors(path, tensors, {{"format", "pt"}});
}

// The largest resident set of any child this test process has waited for, in kB.
long childPeakKb() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return usage.ru_maxrss;
}

// Expects a refusal: exit 2, every part in stderr, no internal error, within
// `seconds` of wall time (the process start and libtorch's load included).
CliResult expectRefused(const std::vector<std::string>& args, const std::vector<std::string>& parts, double seconds = 10) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = runCli(args);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.exited) << "crashed\n" << r.describe();
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  for (const auto& part : parts) EXPECT_NE(r.err.find(part), std::string::npos) << "'" << part << "'\n" << r.describe();
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.describe();
  EXPECT_LT(took, seconds) << r.describe();
  return r;
}

std::vector<std::string> generate(const std::string& model) {
  return {"generate", "--model", model, "--prompt-ids", "5,6,7", "--max-new", "4", "--greedy", "--ignore-eos", "--json"};
}

TEST(CliSane, NanWeightsStopGenerateNamingTheLayer) {
  ScratchDir dir("nan_weights");
  const std::string model = copiedModel(dir, "llama-tiny", [](nlohmann::json&) {});
  ASSERT_EQ(runCli(generate(model)).exit_code, 0) << "the unedited copy generates";
  poisonTensor(model, "model.layers.1.mlp.down_proj.weight");
  const CliResult r = expectRefused(generate(model), {"non-finite logits", "in layer 1", "MLP", "model.layers.1.mlp"});
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << "no result line: " << r.describe();
}

TEST(CliSane, ConfigsThatGaveNanLogitsAreRefusedByField) {
  ScratchDir dir("nan_configs");
  const std::string one = copiedModel(dir, "phi3-longrope-tiny", [](nlohmann::json& c) { c["original_max_position_embeddings"] = 1; });
  expectRefused(generate(one), {"config.json", "'original_max_position_embeddings'"});
  fs::remove_all(one);
  const std::string tiny = copiedModel(dir, "phi3-longrope-tiny", [](nlohmann::json& c) { c["rope_scaling"]["long_factor"][0] = 1e-300; });
  expectRefused(generate(tiny), {"'rope_scaling.long_factor[0]'"});
  const std::string cap = copiedModel(dir, "gemma2-tiny", [](nlohmann::json& c) { c["final_logit_softcapping"] = 1e-300; });
  expectRefused({"inspect", cap, "--json"}, {"'final_logit_softcapping'"});
}

TEST(CliSane, ConfigAndCheckpointMustAgree) {
  ScratchDir dir("agreement");
  // llama-tiny holds 2 layers; a config saying 1 used to run half the model.
  const std::string fewer = copiedModel(dir, "llama-tiny", [](nlohmann::json& c) { c["num_hidden_layers"] = 1; });
  expectRefused(generate(fewer), {"does not account for", "model.layers.1.", "config.json says 1"});
  fs::remove_all(fewer);
  const std::string eos = copiedModel(dir, "llama-tiny", [](nlohmann::json& c) { c["eos_token_id"] = 512; });
  expectRefused(generate(eos), {"'eos_token_id' holds 512"});
}

TEST(CliSane, DuplicateKeyInConfigRefused) {
  ScratchDir dir("duplicate");
  const std::string model = copiedModel(dir, "llama-tiny", [](nlohmann::json&) {});
  std::string text = readJson(fs::path(model) / "config.json").dump();
  text.insert(1, "\"vocab_size\": 4096, ");
  std::ofstream(fs::path(model) / "config.json", std::ios::trunc) << text;
  expectRefused({"inspect", model, "--json"}, {"duplicate key 'vocab_size'"});
}

TEST(CliSane, MakeModelEstimatesMemoryBeforeAllocating) {
  ScratchDir dir("make_model");
  nlohmann::json huge = readJson(fs::path(modelDir("llama-tiny")) / "config.json");
  huge["vocab_size"] = 1 << 24;  // within every field's limit: 2^24 x 2^20 embedding, 64 TB
  huge["hidden_size"] = 1 << 20;
  huge["intermediate_size"] = 1 << 20;
  huge["num_attention_heads"] = 1024;
  huge["num_key_value_heads"] = 1024;
  huge["bos_token_id"] = 1;
  std::ofstream(dir.file("huge.json")) << huge.dump();
  const CliResult r = expectRefused({"make-model", "--shape", dir.file("huge.json"), "--out", dir.file("out")},
                                    {"huge.json", "parameters", "needs about", "TB of memory", "GB (the limit)"}, 5);
  EXPECT_FALSE(fs::exists(dir.file("out"))) << "nothing written";
  // libtorch alone takes ~300 MB resident; the model would take terabytes.
  EXPECT_LT(childPeakKb(), 1024 * 1024) << r.describe();
}

TEST(CliSane, CompressTextFileIsBoundedWhileReading) {
  // /dev/zero never ends; it was read to 4.4 GB, then "internal error".
  const CliResult r = expectRefused({"compress", "--model", modelDir("llama-tiny"), "--prompt-ids", "5,6,7", "--text-file",
                                     "/dev/zero", "--policy", "streaming"},
                                    {"/dev/zero", "longer than the limit of 16777216 bytes for --text-file"}, 10);
  EXPECT_LT(childPeakKb(), 1024 * 1024) << r.describe();
  // A regular file over the limit is refused by its size, before any byte is read.
  ScratchDir dir("text_file");
  const std::string big = dir.file("big.txt");
  std::ofstream(big).close();
  fs::resize_file(big, (size_t{16} << 20) + 1);  // sparse: no 16 MB written
  expectRefused({"compress", "--model", modelDir("llama-tiny"), "--prompt-ids", "5,6,7", "--text-file", big, "--policy",
                 "streaming"},
                {"big.txt", "16777217 bytes exceed the limit of 16777216 bytes for --text-file"});
}

}  // namespace
}  // namespace kvscope::cli_test
