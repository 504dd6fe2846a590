#include "core/model/json_fields.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvscope {

namespace {

std::string range(int64_t min, int64_t max) {
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

int64_t jsonInteger(const nlohmann::json& value, const std::string& context, const std::string& field,
                    int64_t min, int64_t max) {
  bool ok = false;
  int64_t result = 0;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    result = ok ? static_cast<int64_t>(u) : 0;
  } else if (value.is_number_integer()) {
    result = value.get<int64_t>();
    ok = true;
  }
  if (!ok || result < min || result > max)
    fail(context, field + " must be an integer in " + range(min, max) + ", got " + jsonSnippet(value));
  return result;
}

std::vector<int64_t> jsonIntegers(const nlohmann::json& value, const std::string& context,
                                  const std::string& field, int64_t min, int64_t max) {
  if (!value.is_array()) fail(context, field + " must be a list of integers, got " + jsonSnippet(value));
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(jsonInteger(value[i], context, field + "[" + std::to_string(i) + "]", min, max));
  return out;
}

std::string jsonString(const nlohmann::json& value, const std::string& context, const std::string& field) {
  if (!value.is_string()) fail(context, field + " must be a string, got " + jsonSnippet(value));
  return value.get<std::string>();
}

std::string jsonSnippet(const nlohmann::json& value, size_t max_chars) {
  // Containers are summarised without walking them (dump() recurses).
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " members";
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " elements";
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace kvscope
