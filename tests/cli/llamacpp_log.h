#pragma once
// A llama.cpp run written here byte by byte, for the commands that read one
// (import-llamacpp, then check) without llama.cpp: a sequence state in
// llama_state_seq_save_file's layout, and the recorder's log of the calls
// (interop/llamacpp/recorder.mjs writes the same, docs/llamacpp.md).
#include <cstdint>
#include <fstream>
#include <string>

#include "tests/cli/cli_test_support.h"

namespace kvscope::cli_test {

class Bytes {
 public:
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& i32(int32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& raw(const void* p, size_t n) {
    s.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string s;
};

// llama-tiny-draft: 1 layer, 2 kv heads x 16. Cells 0..n-1 at positions 0..n-1,
// F32 rows filled with `value` (plain V rows, as with flash attention on).
inline std::string stateOf(int n, float value) {
  Bytes b;
  b.u32(0x67677371).u32(3).u32(0);
  b.u32(1).u32(static_cast<uint32_t>(n));
  for (int c = 0; c < n; ++c) b.i32(c).u32(1).i32(0);
  b.u32(0).u32(1);
  for (int kv = 0; kv < 2; ++kv) {
    b.i32(0).u64(32 * 4);
    for (int i = 0; i < n * 32; ++i) b.raw(&value, 4);
  }
  return b.s;
}

// dir/log.json: one target call of llama-tiny-draft (exported to dir/d.gguf
// here) on three tokens, whose state holds rows of 0.25, not the model's.
inline void writeOneCallLog(const ScratchDir& dir) {
  const std::string model = modelDir("llama-tiny-draft");
  const CliResult exported = runCli({"export-gguf", "--model", model, "--out", dir.file("d.gguf")});
  ASSERT_EQ(exported.exit_code, 0) << exported.describe();
  std::ofstream(dir.file("t-0.state"), std::ios::binary) << stateOf(3, 0.25f);
  const nlohmann::json log = {
      {"format", "kvscope-llamacpp-log"}, {"version", 1}, {"engine", "written by hand"}, {"complete", true},
      {"models", {{"target", {{"gguf", "d.gguf"}, {"model_dir", model}}}}},
      {"events", {{{"role", "target"}, {"op", "evaluate"}, {"tokens", {1, 377, 397}}, {"positions", {0, 1, 2}}, {"state", "t-0.state"}}}},
      {"committed", {1, 377, 397}}};
  std::ofstream(dir.file("log.json")) << log.dump();
}

}  // namespace kvscope::cli_test
