#include "core/train/train_checkpoint.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include "core/error.h"
#include "core/model/checkpoint.h"

namespace kvscope {
namespace fs = std::filesystem;
namespace {

const char* kLatest = "latest";
const char* kPrevious = "previous";
const char* kPartial = "partial";

bool complete(const fs::path& dir) {
  return fs::exists(dir / "state.json") && fs::exists(dir / "model.safetensors") && fs::exists(dir / "optimizer.pt");
}

}  // namespace

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
  std::ifstream in((chosen / "state.json").string());
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("step")) fail(context, "state.json is not valid");
  TrainState state;
  state.step = j.at("step").get<int64_t>();
  state.tokens = j.value("tokens", int64_t{0});
  state.seconds = j.value("seconds", 0.0);
  if (j.contains("val_history")) state.val_history = j.at("val_history").get<std::vector<std::pair<int64_t, double>>>();
  return state;
}

}  // namespace kvscope
