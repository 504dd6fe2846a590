#include "core/model/tokenizer/tokenizer_json.h"

#include "core/error.h"
#include "core/model/json_fields.h"

namespace kvscope {

nlohmann::json readJsonFile(const std::string& path, const JsonLimits& limits) {
  return readJsonFileWithLimits(path, limits);
}

std::string componentType(const nlohmann::json& node, const std::string& context,
                          const std::string& what) {
  if (!node.is_object()) fail(context, what + " must be a JSON object");
  const auto it = node.find("type");
  if (it == node.end() || !it->is_string()) fail(context, what + " has no \"type\"");
  return it->get<std::string>();
}

std::string tokenContent(const nlohmann::json& node) {
  if (node.is_string()) return node.get<std::string>();
  if (node.is_object()) return valueOr<std::string>(node, "content", "");
  return "";
}

}  // namespace kvscope
