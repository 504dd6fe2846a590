#include "app/cli/cli_common.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include <torch/torch.h>

#include "core/error.h"
#include "core/model/bundled_models.h"

namespace kvscope::cli {

c10::TensorOptions computeOptions() { return torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU); }

std::vector<int64_t> promptIds(Args& args, const Tokenizer& tokenizer) {
  auto text = args.value("prompt");
  auto ids = args.idList("prompt-ids");
  if (text && ids) throw Error("give either --prompt or --prompt-ids, not both");
  if (ids) return *ids;
  if (text) return tokenizer.encode(*text);
  throw Error("missing prompt: give --prompt TEXT or --prompt-ids 1,2,3");
}

SamplingSettings samplingSettings(Args& args) {
  SamplingSettings s;
  const bool greedy = args.flag("greedy");
  const auto temperature = args.value("temperature");
  const auto top_k = args.value("top-k");
  const auto top_p = args.value("top-p");
  const bool sampled = temperature || top_k || top_p;
  if (greedy && sampled) throw Error("--greedy cannot be combined with --temperature, --top-k or --top-p");
  s.greedy = !sampled;
  s.temperature = args.number("temperature", 1.0);
  s.top_k = args.integer("top-k", 0);
  s.top_p = args.number("top-p", 1.0);
  s.validate();
  return s;
}

void printJson(const nlohmann::json& result) {
  std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

std::string modelDirectory(Args& args, const std::string& option, const std::string& role) {
  if (auto dir = args.value(option)) return *dir;
  return bundledModelDirectory(role);
}

std::string readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace kvscope::cli
