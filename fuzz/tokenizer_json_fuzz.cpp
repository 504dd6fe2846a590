// Fuzzes tokenizer.json loading (every component kind, nesting, ids) and,
// when a file loads, a few encodes and decodes through it: the normalizer,
// pre-tokenizer and decoder chains run on text the file did not expect.
#include <vector>

#include "core/error.h"
#include "core/model/tokenizer/tokenizer.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvscope::fuzz::MemoryFile file(data, size);
  std::unique_ptr<kvscope::Tokenizer> tokenizer;
  try {
    tokenizer = kvscope::Tokenizer::fromFile(file.path());
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
    return 0;
  }
  for (const char* text : {"Hello world", " a  b\n\tc", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "\xF0\x9F\x98\x80 \xC3\xA9\xFF"}) {
    try {
      const std::vector<int64_t> ids = tokenizer->encode(text);
      for (int64_t id : ids) {
        if (id < 0 || id >= tokenizer->vocabSize()) __builtin_trap();  // encode must stay in the vocabulary
      }
      (void)tokenizer->decode(ids);
    } catch (const kvscope::Error& e) {
      kvscope::fuzz::rejected(e);
    }
  }
  for (int64_t id : {int64_t{0}, int64_t{1}, tokenizer->vocabSize() - 1, tokenizer->vocabSize()}) {
    try {
      (void)tokenizer->tokenText(id);
      (void)tokenizer->decode({id, id});
    } catch (const kvscope::Error& e) {
      kvscope::fuzz::rejected(e);
    }
  }
  return 0;
}
