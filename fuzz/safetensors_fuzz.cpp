// Fuzzes SafetensorsFile::open: header length, header JSON, tensor layout.
// Every model load and every trace open goes through it.
#include "core/error.h"
#include "core/model/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvscope::fuzz::MemoryFile file(data, size);
  try {
    const auto st = kvscope::SafetensorsFile::open(file.path());
    // Touch what a reader touches: every tensor's first and last byte.
    volatile uint8_t sink = 0;
    for (const auto& info : st->tensors()) {
      if (info.end > info.begin) sink = sink ^ st->data(info)[0] ^ st->data(info)[info.end - info.begin - 1];
    }
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
