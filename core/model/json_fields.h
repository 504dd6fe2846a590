#pragma once
// Typed reads of single JSON values from untrusted files, with errors that
// name the file and the field. nlohmann's get<int64_t>() converts a float
// with a plain cast (undefined behaviour for 1e300) and get<size_t>() wraps
// negatives; these refuse instead. Torch-free.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

// `value` (the field `field` of `context`) as an integer in [min, max].
// Floats (even 2.0: Hugging Face's readers refuse them too), booleans,
// strings and integers outside the range throw
// Error("<context>: <field> must be an integer in [min, max], got <value>").
int64_t jsonInteger(const nlohmann::json& value, const std::string& context, const std::string& field,
                    int64_t min = std::numeric_limits<int64_t>::min(),
                    int64_t max = std::numeric_limits<int64_t>::max());

// A list of such integers; the error names the element ("field[3]").
std::vector<int64_t> jsonIntegers(const nlohmann::json& value, const std::string& context,
                                  const std::string& field, int64_t min = std::numeric_limits<int64_t>::min(),
                                  int64_t max = std::numeric_limits<int64_t>::max());

// `value` as a string, or Error("<context>: <field> must be a string, got ...").
std::string jsonString(const nlohmann::json& value, const std::string& context, const std::string& field);

// The value as JSON text cut to about max_chars, for error messages: a
// field holding megabytes must not make a megabyte error.
std::string jsonSnippet(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace kvscope
