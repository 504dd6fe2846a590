#include "core/train/model_writer.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/model/checkpoint.h"

namespace kvscope {
namespace fs = std::filesystem;
namespace {

void writeJson(const fs::path& path, const nlohmann::json& j) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary);
    if (!out) fail(path.string(), "cannot open for writing");
    out << j.dump(2) << "\n";
    if (!out) fail(path.string(), "write failed");
  }
  fs::rename(partial, path);
}

const char* dtypeName(StDType storage) {
  switch (storage) {
    case StDType::BF16: return "bfloat16";
    case StDType::F16: return "float16";
    default: return "float32";
  }
}

}  // namespace

void writeModelDirectory(const CausalLM& model, const ModelDirectoryContents& contents, const std::string& out_dir) {
  const fs::path out(out_dir);
  fs::create_directories(out);
  nlohmann::json config = contents.config;
  config["torch_dtype"] = dtypeName(contents.storage);
  writeJson(out / "config.json", config);

  nlohmann::json generation = {{"bos_token_id", config.at("bos_token_id")},
                               {"eos_token_id", config.at("eos_token_id")},
                               {"do_sample", false},
                               {"max_new_tokens", 64}};
  writeJson(out / "generation_config.json", generation);

  NamedTensors weights;
  for (const auto& [name, tensor] : model.namedParameters()) weights.emplace_back(name, tensor.detach());
  saveTensors((out / "model.safetensors").string(), weights, {{"format", "pt"}}, contents.storage);

  // No tokenizer directory: a random-weight model that runs on ids only.
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    if (contents.tokenizer_dir.empty()) break;
    const fs::path from = fs::path(contents.tokenizer_dir) / name;
    if (!fs::exists(from)) {
      if (std::string(name) == "tokenizer.json") fail(from.string(), "tokenizer file not found");
      continue;
    }
    if (fs::exists(out / name) && fs::equivalent(from, out / name)) continue;
    fs::copy_file(from, out / name, fs::copy_options::overwrite_existing);
  }
  if (!contents.training.is_null()) writeJson(out / "training.json", contents.training);
}

}  // namespace kvscope
