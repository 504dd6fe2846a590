#pragma once
// Reading JSON from untrusted files (safetensors headers, config.json,
// tokenizer.json, shard indexes, trace metadata) within stated limits.
// The limits are enforced while parsing, before the value exists: nlohmann's
// DOM is recursive (copy, dump and comparison recurse per level), so a
// 100,000-deep array crashes whatever touches it later, and the number of
// values decides the memory a document takes (16-100 bytes each).
// Torch-free.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvscope {

struct JsonLimits {
  const char* kind = "JSON";  // what the document is, for errors ("tokenizer.json")
  size_t max_bytes = 0;       // size of the text
  size_t max_depth = 0;       // nested arrays/objects; the top-level value is level 1
  size_t max_values = 0;      // values of any kind, containers included
  // Numbers must convert to int64 without overflow (|x| < 2^63), so that an
  // integer field holding 1e300 or 2^64 is refused here, with its path,
  // rather than converted with undefined behaviour later.
  bool int64_numbers = true;
  // Refuse an object that repeats a key (nlohmann would keep the last one).
  bool unique_keys = false;
};

// The limits of each kind of file kvscope reads.
extern const JsonLimits kSafetensorsHeaderLimits;
extern const JsonLimits kConfigJsonLimits;
extern const JsonLimits kTokenizerJsonLimits;
extern const JsonLimits kTokenizerConfigLimits;
extern const JsonLimits kShardIndexLimits;
extern const JsonLimits kTraceMetadataLimits;

// Called with each member of the top-level object as soon as it is complete,
// instead of storing it: a safetensors header with a million tensors is then
// read in linear time and never held whole. The returned root object is empty.
using JsonMemberSink = std::function<void(std::string key, nlohmann::json value)>;

// Parses `text`, the content of `context` (a file name, named in every error).
// Throws Error("<context>: ...") for malformed JSON and for any limit
// exceeded, naming the limit and the JSON path where it was hit. A NUL byte
// ends the text only when nothing but NULs and spaces follow it (padding).
nlohmann::json parseJsonWithLimits(std::string_view text, const std::string& context,
                                   const JsonLimits& limits, const JsonMemberSink& sink = {});

// Reads and parses the file at `path`; its size is checked before reading.
nlohmann::json readJsonFileWithLimits(const std::string& path, const JsonLimits& limits);

}  // namespace kvscope
