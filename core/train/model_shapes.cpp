#include "core/train/model_shapes.h"

#include <filesystem>

#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/json_limits.h"
#include "core/train/model_writer.h"
#include "core/train/training_config.h"

namespace kvscope {
namespace fs = std::filesystem;
namespace {

// Qwen/Qwen2.5-0.5B's config.json (494 M parameters; tied embeddings, q/k/v
// biases, 14 query heads sharing 2 kv heads of 64).
nlohmann::json qwen25HalfBillion() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", "qwen2"},
          {"hidden_act", "silu"},
          {"hidden_size", 896},
          {"intermediate_size", 4864},
          {"num_hidden_layers", 24},
          {"num_attention_heads", 14},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 32768},
          {"max_window_layers", 24},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"sliding_window", nullptr},
          {"use_sliding_window", false},
          {"tie_word_embeddings", true},
          {"vocab_size", 151936},
          {"bos_token_id", 151643},
          {"eos_token_id", 151643},
          {"attention_dropout", 0.0},
          {"initializer_range", 0.02},
          {"use_cache", true}};
}

nlohmann::json configFile(const fs::path& path) {
  return readJsonFileWithLimits(path.string(), kConfigJsonLimits);
}

}  // namespace

std::vector<std::string> modelShapeNames() { return {"qwen2.5-0.5b", "bundled-target", "bundled-drafter"}; }

nlohmann::json modelShapeConfig(const std::string& shape) {
  if (shape == "qwen2.5-0.5b") return qwen25HalfBillion();
  if (shape == "bundled-target" || shape == "bundled-drafter") {
    return configFile(fs::path(bundledModelDirectory(shape.substr(shape.find('-') + 1))) / "config.json");
  }
  if (fs::is_directory(shape) && fs::exists(fs::path(shape) / "config.json")) return configFile(fs::path(shape) / "config.json");
  if (fs::is_regular_file(shape)) return configFile(shape);
  std::string names;
  for (const std::string& name : modelShapeNames()) names += (names.empty() ? "" : ", ") + name;
  throw Error("unknown model shape '" + shape + "': give one of " + names +
              ", a config.json or a model directory");
}

int64_t writeRandomModel(const nlohmann::json& config_json, StDType storage, uint64_t seed, const std::string& out_dir) {
  const ModelConfig config = parseModelConfig(config_json, "model shape");
  // Built in float32 (2 GB for 0.5 B parameters), stored once in `storage`.
  const auto model = buildCausalLM(config, initialWeights(config, seed), torch::TensorOptions().dtype(torch::kFloat32),
                                   "random weights");
  nlohmann::json written = config_json;
  if (!written.contains("bos_token_id")) written["bos_token_id"] = nullptr;
  if (!written.contains("eos_token_id")) written["eos_token_id"] = nullptr;
  writeModelDirectory(*model, ModelDirectoryContents{written, /*tokenizer_dir=*/"", storage, nullptr}, out_dir);
  return model->parameterCount();
}

}  // namespace kvscope
