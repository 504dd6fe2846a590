// kvscope-cli export-gguf and import-llamacpp end to end, without
// llama.cpp: the exported file read back by kvscope's GGUF reader, refusals
// with exit 2 and no file left, and a llama.cpp state written here byte by
// byte (llama_state_seq_save_file's layout) imported and checked: rows that
// are not the model's are named as wrong values. The llamacpp_* CTests run
// the real llama.cpp (node-llama-cpp) on the same commands.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/gguf/gguf_file.h"
#include "tests/cli/cli_test_support.h"
#include "tests/cli/llamacpp_log.h"

namespace kvscope::cli_test {
namespace {

const std::string kModels = std::string(KVSCOPE_FIXTURES) + "/models/";

TEST(CliLlamaCpp, ExportGgufWritesAFileTheReaderAccepts) {
  ScratchDir dir("export_gguf");
  const auto j = runJson({"export-gguf", "--model", kModels + "qwen3-tiny", "--out", dir.file("q3.gguf"), "--dtype", "f16", "--json"});
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["tensors"], 35);
  EXPECT_EQ(j["tokens"], 512);
  const GgufFile f = readGguf(dir.file("q3.gguf"));
  EXPECT_EQ(f.text("general.architecture"), "qwen3");
  EXPECT_EQ(f.integer("general.file_type"), 1);
  EXPECT_EQ(f.tensor("blk.0.ffn_up.weight")->type, GgmlType::F16);
  EXPECT_EQ(f.tensor("blk.0.attn_q_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(j["bytes"], fs::file_size(dir.file("q3.gguf")));
}

TEST(CliLlamaCpp, ExportGgufRefusalsExitTwoAndLeaveNoFile) {
  ScratchDir dir("export_refused");
  auto r = runCli({"export-gguf", "--model", kModels + "mistral-sw-tiny", "--out", dir.file("m.gguf")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("sliding_window 16"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("m.gguf")));
  r = runCli({"export-gguf", "--model", kModels + "llama-tiny", "--out", dir.file("x.gguf"), "--dtype", "q4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--dtype must be f32 or f16"), std::string::npos) << r.err;
}

TEST(CliLlamaCpp, ImportedRowsThatAreNotTheModelsAreWrongValues) {
  ScratchDir dir("import_llamacpp");
  writeOneCallLog(dir);
  const auto j = runJson({"import-llamacpp", dir.file("log.json"), "--out", dir.file("run.kvcapture"), "--json"});
  EXPECT_EQ(j["calls"]["target"], 1);
  EXPECT_EQ(j["cache_type"], "F32");
  CliResult r = runCli({"check", dir.file("run.kvcapture"), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto c = r.lastJson();
  EXPECT_EQ(c["root_cause"]["role"], "target") << r.describe();
  EXPECT_EQ(c["root_cause"]["call"], 0);
  EXPECT_EQ(c["root_cause"]["kind"], "values") << r.describe();
}

TEST(CliLlamaCpp, ImportRefusesABadLogOrStateByName) {
  ScratchDir dir("import_refused");
  std::ofstream(dir.file("log.json")) << R"({"format": "something else", "version": 1})";
  auto r = runCli({"import-llamacpp", dir.file("log.json"), "--out", dir.file("x.kvcapture")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a kvscope llama.cpp recorder log"), std::string::npos) << r.err;
  runJson({"export-gguf", "--model", kModels + "llama-tiny-draft", "--out", dir.file("d.gguf"), "--json"});
  std::string state = stateOf(2, 0.0f);
  const int32_t q8_0 = 8;
  std::memcpy(state.data() + 12 + 8 + 2 * 12 + 8, &q8_0, 4);  // the first K type
  std::ofstream(dir.file("t.state"), std::ios::binary) << state;
  const nlohmann::json log = {
      {"format", "kvscope-llamacpp-log"}, {"version", 1},
      {"models", {{"target", {{"gguf", "d.gguf"}, {"model_dir", kModels + "llama-tiny-draft"}}}}},
      {"events", {{{"role", "target"}, {"op", "evaluate"}, {"tokens", {1, 377}}, {"positions", {0, 1}}, {"state", "t.state"}}}}};
  std::ofstream(dir.file("log.json"), std::ios::trunc) << log.dump();
  r = runCli({"import-llamacpp", dir.file("log.json"), "--out", dir.file("x.kvcapture")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("q8_0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("x.kvcapture")));
}

// A GGUF's keys and tensor names reach the terminal in import-llamacpp's
// errors: escaped (\x1b shown as text), the way `kvscope-cli trace` shows
// names from a trace.
TEST(CliLlamaCpp, NamesFromAHostileGgufCannotDriveTheTerminal) {
  ScratchDir dir("gguf_escapes");
  const std::string key = "\x1b[5m\x1b[31mgeneral.blink\x1b[0m\r\x07";
  Bytes gguf;
  gguf.raw("GGUF", 4).u32(3).u64(0).u64(2);
  for (uint8_t v : {1, 2}) gguf.u64(key.size()).raw(key.data(), key.size()).u32(0).raw(&v, 1);  // u8 values
  std::ofstream(dir.file("hostile.gguf"), std::ios::binary) << gguf.s;
  const nlohmann::json log = {
      {"format", "kvscope-llamacpp-log"}, {"version", 1},
      {"models", {{"target", {{"gguf", "hostile.gguf"}, {"model_dir", kModels + "llama-tiny-draft"}}}}},
      {"events", nlohmann::json::array()}};
  std::ofstream(dir.file("log.json")) << log.dump();
  const CliResult r = runCli({"import-llamacpp", dir.file("log.json"), "--out", dir.file("x.kvcapture")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("appears twice"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[5m\\x1b[31mgeneral.blink"), std::string::npos) << "shown escaped, not dropped: " << r.err;
  for (const char c : {'\x1b', '\r', '\x07'}) EXPECT_EQ(r.err.find(c), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("x.kvcapture")));
}

}  // namespace
}  // namespace kvscope::cli_test
