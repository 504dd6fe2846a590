#include "core/model/tokenizer/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kvscope {

nlohmann::json readJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, std::string("malformed JSON: ") + e.what());
  }
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
