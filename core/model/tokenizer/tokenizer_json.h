#pragma once
// Small helpers for reading tokenizer.json / tokenizer_config.json with
// errors that name the file and the field.
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/json_limits.h"

namespace kvscope {

// Parses a JSON file within `limits` (kTokenizerJsonLimits, ...). Throws
// Error("<path>: cannot open file"), Error("<path>: malformed JSON: ...") or
// an Error naming the limit exceeded.
nlohmann::json readJsonFile(const std::string& path, const JsonLimits& limits);

// The "type" string of a component object (normalizer, decoder, ...).
// what names the component for the error ("normalizer", "decoder", ...).
std::string componentType(const nlohmann::json& node, const std::string& context,
                          const std::string& what);

// node[key] as T, or fallback when the key is absent or null.
template <typename T>
T valueOr(const nlohmann::json& node, const char* key, T fallback) {
  const auto it = node.find(key);
  if (it == node.end() || it->is_null()) return fallback;
  return it->template get<T>();
}

// A token given as a plain string or as an AddedToken object
// ({"content": ...}); empty when null or absent.
std::string tokenContent(const nlohmann::json& node);

}  // namespace kvscope
