#include "core/train/train_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include "core/error.h"
#include "core/model/checkpoint.h"
#include "core/model/json_fields.h"
#include "core/model/json_limits.h"

namespace kvscope {
namespace fs = std::filesystem;
namespace {

const char* kLatest = "latest";
const char* kPrevious = "previous";
const char* kPartial = "partial";

bool complete(const fs::path& dir) {
  return fs::exists(dir / "state.json") && fs::exists(dir / "model.safetensors") && fs::exists(dir / "optimizer.pt");
}

// A finite number in [0, max] for `field`, or an Error naming it.
double nonNegativeNumber(const nlohmann::json& j, const char* field, const std::string& context) {
  const nlohmann::json& v = j.at(field);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    fail(context, std::string("'") + field + "' must be a finite number >= 0, got " + jsonSnippet(v));
  }
  return v.get<double>();
}

}  // namespace

TrainState readTrainState(const std::string& path) {
  // The config.json limits: small, shallow, every number an int64 or a
  // float, keys unique. get<int64_t>() would cast 2.5 or 1e300 silently.
  const nlohmann::json j = readJsonFileWithLimits(path, kConfigJsonLimits);
  if (!j.is_object() || !j.contains("step")) fail(path, "state.json needs an object with 'step'");
  TrainState state;
  state.step = jsonInteger(j.at("step"), path, "'step'", 0, kMaxTrainSteps);
  if (j.contains("tokens")) state.tokens = jsonInteger(j.at("tokens"), path, "'tokens'", 0);
  if (j.contains("seconds")) state.seconds = nonNegativeNumber(j, "seconds", path);
  if (!j.contains("val_history")) return state;
  const nlohmann::json& history = j.at("val_history");
  if (!history.is_array()) fail(path, "'val_history' must be a list of [step, loss] pairs");
  for (size_t i = 0; i < history.size(); ++i) {
    const std::string where = "'val_history[" + std::to_string(i) + "]'";
    const nlohmann::json& pair = history[i];
    if (!pair.is_array() || pair.size() != 2) fail(path, where + " must be a [step, loss] pair, got " + jsonSnippet(pair));
    const int64_t at = jsonInteger(pair[0], path, where + "[0] (a step)", 1, state.step);
    if (!pair[1].is_number() || !std::isfinite(pair[1].get<double>())) {
      fail(path, where + "[1] (a loss) must be a finite number, got " + jsonSnippet(pair[1]));
    }
    state.val_history.emplace_back(at, pair[1].get<double>());
  }
  return state;
}

void saveTrainCheckpoint(const std::string& dir, const CausalLM& model, torch::optim::Optimizer& optimizer,
                         const TrainState& state) {
  const fs::path root(dir);
  const fs::path partial = root / kPartial;
  fs::remove_all(partial);
  fs::create_directories(partial);

  NamedTensors weights;
  for (const auto& [name, tensor] : model.namedParameters()) weights.emplace_back(name, tensor.detach());
  saveTensors((partial / "model.safetensors").string(), weights, {{"format", "pt"}}, StDType::F32);
  torch::save(optimizer, (partial / "optimizer.pt").string());
  nlohmann::json j = {{"step", state.step}, {"tokens", state.tokens}, {"seconds", state.seconds},
                      {"val_history", state.val_history}};
  std::ofstream((partial / "state.json").string()) << j.dump(1) << "\n";
  if (!complete(partial)) fail(partial.string(), "checkpoint write failed");

  // Swap in: latest -> previous, partial -> latest.
  fs::remove_all(root / kPrevious);
  if (fs::exists(root / kLatest)) fs::rename(root / kLatest, root / kPrevious);
  fs::rename(partial, root / kLatest);
}

std::optional<TrainState> loadTrainCheckpoint(const std::string& dir, CausalLM& model,
                                              torch::optim::Optimizer& optimizer) {
  fs::path chosen;
  for (const char* name : {kLatest, kPrevious}) {
    if (complete(fs::path(dir) / name)) {
      chosen = fs::path(dir) / name;
      break;
    }
  }
  if (chosen.empty()) return std::nullopt;

  const std::string context = "resuming from " + chosen.string();
  const Checkpoint ckpt = Checkpoint::open(chosen.string());
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : model.namedParameters()) {
      if (!ckpt.has(name)) fail(context, "checkpoint lacks tensor '" + name + "'");
      at::Tensor stored = ckpt.load(name, tensor.options());
      if (stored.sizes() != tensor.sizes()) {
        fail(context, "tensor '" + name + "' has another shape than the model (was --arch-config changed?)");
      }
      tensor.copy_(stored);
    }
  }
  try {
    torch::load(optimizer, (chosen / "optimizer.pt").string());
  } catch (const std::exception& e) {
    fail(context, std::string("cannot load optimizer.pt: ") + e.what());
  }
  return readTrainState((chosen / "state.json").string());
}

}  // namespace kvscope
