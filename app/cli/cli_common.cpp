#include "app/cli/cli_common.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <torch/types.h>

#include "core/decode/batch_session.h"
#include "core/error.h"
#include "core/model/bundled_models.h"

namespace kvscope::cli {

c10::TensorOptions computeOptions() { return torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU); }

WeightResidency weightResidency(Args& args) {
  return parseWeightResidency(args.value("weights").value_or("stored"), "--weights");
}

std::vector<int64_t> promptIds(Args& args, const ModelBundle& model) {
  auto text = args.value("prompt");
  auto ids = args.idList("prompt-ids");
  if (text && ids) throw Error("give either --prompt or --prompt-ids, not both");
  if (ids) return *ids;
  if (text && !model.has_tokenizer) {
    throw Error("--prompt needs a tokenizer, but " + model.dir +
                " has no tokenizer.json: give the prompt as token ids with --prompt-ids 1,2,3");
  }
  if (text) return model.tokenizer->encode(*text);
  throw Error("missing prompt: give --prompt TEXT or --prompt-ids 1,2,3");
}

std::vector<std::string> promptFileLines(const std::string& path, int64_t max_prompts, const std::string& why) {
  constexpr std::uintmax_t kMaxBytes = 16 * 1024 * 1024;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) throw Error("--prompts " + path + ": cannot read it (" + ec.message() + ")");
  if (bytes > kMaxBytes) {
    throw Error("--prompts " + path + ": " + std::to_string(bytes) + " bytes; a prompt file holds at most " +
                std::to_string(kMaxBytes) + " (one prompt per line)");
  }
  std::ifstream in(path);
  if (!in) throw Error("--prompts " + path + ": cannot open it");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (static_cast<int64_t>(lines.size()) == max_prompts) {
      throw Error("--prompts " + path + ": more than " + std::to_string(max_prompts) + " prompts; " + why);
    }
    lines.push_back(line);
  }
  if (lines.empty()) throw Error("--prompts " + path + ": no prompt in it (one prompt per line)");
  return lines;
}

namespace {

std::vector<int64_t> encodePrompt(const ModelBundle& model, const std::string& text, const std::string& option) {
  if (!model.has_tokenizer) {
    throw Error(option + " needs a tokenizer, but " + model.dir +
                " has no tokenizer.json: give the prompts as token ids with --prompt-ids 1,2,3 (once per sequence)");
  }
  return model.tokenizer->encode(text);
}

}  // namespace

std::vector<std::vector<int64_t>> promptBatch(Args& args, const ModelBundle& model) {
  const std::vector<std::string> texts = args.values("prompt");
  const std::vector<std::string> id_lists = args.values("prompt-ids");
  const auto file = args.value("prompts");
  const int given = (texts.empty() ? 0 : 1) + (id_lists.empty() ? 0 : 1) + (file ? 1 : 0);
  if (given > 1) throw Error("give the prompts one way: --prompt (repeated), --prompt-ids (repeated) or --prompts FILE");
  if (given == 0) throw Error("missing prompt: give --prompt TEXT or --prompt-ids 1,2,3 (repeat either for a batch), or --prompts FILE");
  std::vector<std::vector<int64_t>> prompts;
  const size_t count = file ? 0 : std::max(texts.size(), id_lists.size());
  if (static_cast<int64_t>(count) > BatchSession::kMaxSequences) {
    throw Error(std::to_string(count) + " prompts; a batch decodes at most " + std::to_string(BatchSession::kMaxSequences) +
                " sequences together");
  }
  for (const std::string& text : texts) prompts.push_back(encodePrompt(model, text, "--prompt"));
  for (const std::string& ids : id_lists) prompts.push_back(parseIdList(ids, "prompt-ids"));
  if (file) {
    const auto lines = promptFileLines(*file, BatchSession::kMaxSequences, "a batch decodes at most that many sequences together");
    for (const std::string& line : lines) prompts.push_back(encodePrompt(model, line, "--prompts"));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) throw Error("prompt " + std::to_string(i) + " encodes to no token");
  }
  return prompts;
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
  s.temperature = args.number("temperature", s.temperature);
  s.top_k = args.integer("top-k", s.top_k);
  s.top_p = args.number("top-p", s.top_p);
  s.validate();
  return s;
}

StDType storageType(const std::string& name) {
  if (name == "bf16") return StDType::BF16;
  if (name == "f16") return StDType::F16;
  if (name == "f32") return StDType::F32;
  throw Error("--dtype must be bf16, f16 or f32, got '" + name + "'");
}

void printJson(const nlohmann::json& result) {
  std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

std::string modelDirectory(Args& args, const std::string& option, const std::string& role) {
  if (auto dir = args.value(option)) return *dir;
  return bundledModelDirectory(role);
}

std::string readFileBytes(const std::string& path, size_t max_bytes, const std::string& what) {
  const auto limit = [&] { return "the limit of " + std::to_string(max_bytes) + " bytes for " + what; };
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) throw Error(path + ": is a directory, not " + what);
  // A regular file's size is known before any byte is read; a device or pipe
  // (/dev/zero never ends) is read up to the limit and refused past it.
  if (std::filesystem::is_regular_file(status)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_bytes) throw Error(path + ": " + std::to_string(size) + " bytes exceed " + limit());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::string bytes;
  constexpr size_t kChunk = size_t{1} << 20;
  while (in && bytes.size() <= max_bytes) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + std::min(kChunk, max_bytes + 1 - old_size));
    in.read(bytes.data() + old_size, static_cast<std::streamsize>(bytes.size() - old_size));
    bytes.resize(old_size + static_cast<size_t>(in.gcount()));
  }
  if (bytes.size() > max_bytes) throw Error(path + ": longer than " + limit() + " (reading stopped there)");
  return bytes;
}

}  // namespace kvscope::cli
