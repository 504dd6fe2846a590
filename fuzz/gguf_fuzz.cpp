// Fuzzes readGguf: a .gguf's header, metadata, tensor infos and vocabulary,
// then what kvscope's users of a GGUF touch: typed metadata
// look-ups, the vocabulary's strings as they are printed, and the first
// elements of every tensor decoded to float32.
#include <algorithm>

#include "core/error.h"
#include "core/gguf/gguf_file.h"
#include "core/model/tokenizer/visible_text.h"
#include "fuzz/fuzz_support.h"

namespace {

// Typed look-ups, the way a consumer asks for a key it expects
// (general.architecture as text, general.alignment as an integer): a key of
// another type is an Error, never a wrong read. The first 64 keys only: each
// look-up is a linear search, and 80,000 tiny keys in 1 MB would make the
// harness quadratic, not the reader.
void touchMetadata(const kvscope::GgufFile& file, volatile uint64_t& sink) {
  for (size_t i = 0; i < std::min<size_t>(file.metadata.size(), 64); ++i) {
    const std::string& key = file.metadata[i].first;
    sink = sink + static_cast<uint64_t>(file.metadata[i].second.size());
    try { sink = sink + static_cast<uint64_t>(file.integer(key)); } catch (const kvscope::Error&) {}
    try { sink = sink + static_cast<uint64_t>(file.number(key) == 0); } catch (const kvscope::Error&) {}
    try { sink = sink + static_cast<uint64_t>(kvscope::visibleText(file.text(key)).size()); } catch (const kvscope::Error&) {}
  }
}

// The first tokens as a CLI would print them.
void touchVocab(const kvscope::GgufFile& file, volatile uint64_t& sink) {
  if (const auto* tokens = file.find("tokenizer.ggml.tokens"))
    for (size_t i = 0; i < std::min<size_t>(tokens->strings.size(), 64); ++i)
      sink = sink + static_cast<uint64_t>(kvscope::visibleText(tokens->strings[i]).size());
}

// The first elements of each tensor (a legitimate 2^40-element tensor is
// slow to decode, not a bug), and one element at its end.
void touchTensors(const std::string& path, const kvscope::GgufFile& file, volatile uint64_t& sink) {
  for (const auto& info : file.tensors) {
    const uint64_t count = info.nbytes / kvscope::ggmlTypeSize(info.type);
    for (float value : kvscope::readGgufFloats(path, file, info, 0, std::min<uint64_t>(count, 16)))
      sink = sink + static_cast<uint64_t>(value == value);
    for (float value : kvscope::readGgufFloats(path, file, info, count - 1, 1)) sink = sink + static_cast<uint64_t>(value == value);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvscope::fuzz::MemoryFile file(data, size);
  try {
    const kvscope::GgufFile gguf = kvscope::readGguf(file.path());
    volatile uint64_t sink = 0;  // unsigned: sums of file values wrap, no UB
    touchMetadata(gguf, sink);
    touchVocab(gguf, sink);
    touchTensors(file.path(), gguf, sink);
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
