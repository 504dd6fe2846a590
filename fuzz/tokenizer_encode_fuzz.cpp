// Fuzzes encode/decode of arbitrary bytes and ids through the fixture
// tokenizers (byte-level GPT-2 style and Llama's byte fallback).
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model/tokenizer/tokenizer.h"
#include "fuzz/fuzz_support.h"

namespace {

const std::vector<std::unique_ptr<kvscope::Tokenizer>>& tokenizers() {
  static const auto loaded = [] {
    std::vector<std::unique_ptr<kvscope::Tokenizer>> out;
    for (const char* dir : {"tests/fixtures/tokenizers/gpt2-tiny", "tests/fixtures/models/llama-tiny",
                            "tests/fixtures/models/qwen2-tiny"})
      out.push_back(kvscope::Tokenizer::fromDirectory(std::string(KVSCOPE_SOURCE_DIR) + "/" + dir));
    return out;
  }();
  return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& tokenizer = *tokenizers()[data[0] % tokenizers().size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const std::vector<int64_t> ids = tokenizer.encode(text, (data[0] & 0x10) != 0);
    for (int64_t id : ids) {
      if (id < 0 || id >= tokenizer.vocabSize()) __builtin_trap();
    }
    (void)tokenizer.decode(ids, (data[0] & 0x20) != 0);
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  // The same bytes read as ids: in range or not, decode must answer.
  std::vector<int64_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) ids.push_back(static_cast<int16_t>(data[i] | (data[i + 1] << 8)));
  try {
    (void)tokenizer.decode(ids);
    for (int64_t id : ids) (void)tokenizer.tokenText(id);
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
